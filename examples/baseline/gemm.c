/* gemm: C = alpha * A * B + beta * C (PolyBench order: i, k, j). Times only kernel_gemm. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define NI 800
#define NJ 900
#define NK 1000

void init_array(int ni, int nj, int nk, double C[ni][nj], double A[ni][nk], double B[nk][nj]) {
  for (int i = 0; i < ni; i++)
    for (int j = 0; j < nj; j++)
      C[i][j] = (double)((i * j + 1) % ni) / ni;
  for (int i = 0; i < ni; i++)
    for (int k = 0; k < nk; k++)
      A[i][k] = (double)(i * (k + 1) % nk) / nk;
  for (int k = 0; k < nk; k++)
    for (int j = 0; j < nj; j++)
      B[k][j] = (double)(k * (j + 2) % nj) / nj;
}

void kernel_gemm(int ni, int nj, int nk, double alpha, double beta,
                 double C[ni][nj], double A[ni][nk], double B[nk][nj]) {
  for (int i = 0; i < ni; i++) {
    for (int j = 0; j < nj; j++)
      C[i][j] *= beta;
    for (int k = 0; k < nk; k++)
      for (int j = 0; j < nj; j++)
        C[i][j] += alpha * A[i][k] * B[k][j];
  }
}

double checksum(int ni, int nj, double C[ni][nj]) {
  double s = 0.0;
  for (int i = 0; i < ni; i++)
    for (int j = 0; j < nj; j++)
      s += C[i][j];
  return s;
}

int main(void) {
  double (*A)[NK] = malloc(sizeof(double[NI][NK]));
  double (*B)[NJ] = malloc(sizeof(double[NK][NJ]));
  double (*C)[NJ] = malloc(sizeof(double[NI][NJ]));
  if (!A || !B || !C) {
    fprintf(stderr, "out of memory\n");
    return 1;
  }
  init_array(NI, NJ, NK, C, A, B);

  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  kernel_gemm(NI, NJ, NK, 1.5, 1.2, C, A, B);
  clock_gettime(CLOCK_MONOTONIC, &t1);

  printf("time: %.6f\n", (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec));
  printf("checksum: %.12e\n", checksum(NI, NJ, C));
  free(A);
  free(B);
  free(C);
  return 0;
}
