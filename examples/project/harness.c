/* Allocates and initializes the arrays, times each kernel, prints a checksum of each result:
   `harness [size]` (default 400). */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include "kernels.h"

static double seconds(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static double checksum(int count, const double *x) {
  double s = 0;
  for (int i = 0; i < count; i++) s += x[i] * (double)(i % 7 + 1);
  return s;
}

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 400;
  double *A = malloc(sizeof(double) * n * n), *B = malloc(sizeof(double) * n * n);
  double *C = malloc(sizeof(double) * n * n);
  if (!A || !B || !C) return 1;
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++) {
      A[i * n + j] = (double)((i * j + 1) % n) / n;
      B[i * n + j] = (double)((i * (j + 1) + 2) % n) / n;
      C[i * n + j] = (double)((i + j) % n) / n;
    }
  double start = seconds();
  gemm(n, n, n, 1.5, 1.2, C, A, B);
  double middle = seconds();
  jacobi_2d(20, n, A, B);
  double end = seconds();
  printf("time gemm: %.6f\ntime jacobi_2d: %.6f\n", middle - start, end - middle);
  printf("checksum gemm: %.10e\nchecksum jacobi_2d: %.10e\n", checksum(n * n, C),
         checksum(n * n, A));
  free(A);
  free(B);
  free(C);
  return 0;
}
