/* jacobi2d: TSTEPS double sweeps of a 5-point Jacobi stencil. Times only kernel_jacobi2d. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define N 1300
#define TSTEPS 80

void init_array(double A[N][N], double B[N][N]) {
  for (int i = 0; i < N; i++)
    for (int j = 0; j < N; j++) {
      A[i][j] = ((double)i * (j + 2) + 2) / N;
      B[i][j] = ((double)i * (j + 3) + 3) / N;
    }
}

void kernel_jacobi2d(double A[N][N], double B[N][N]) {
  for (int t = 0; t < TSTEPS; t++) {
    for (int i = 1; i < N - 1; i++)
      for (int j = 1; j < N - 1; j++)
        B[i][j] = 0.2 * (A[i][j] + A[i][j - 1] + A[i][j + 1] + A[i + 1][j] + A[i - 1][j]);
    for (int i = 1; i < N - 1; i++)
      for (int j = 1; j < N - 1; j++)
        A[i][j] = 0.2 * (B[i][j] + B[i][j - 1] + B[i][j + 1] + B[i + 1][j] + B[i - 1][j]);
  }
}

double checksum(double A[N][N]) {
  double s = 0.0;
  for (int i = 0; i < N; i++)
    for (int j = 0; j < N; j++)
      s += A[i][j] * (1 + (i + j) % 3);
  return s;
}

int main(void) {
  double (*A)[N] = malloc(sizeof(double[N][N]));
  double (*B)[N] = malloc(sizeof(double[N][N]));
  if (!A || !B) {
    fprintf(stderr, "out of memory\n");
    return 1;
  }
  init_array(A, B);

  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  kernel_jacobi2d(A, B);
  clock_gettime(CLOCK_MONOTONIC, &t1);

  printf("time: %.6f\n", (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec));
  printf("checksum: %.12e\n", checksum(A));
  free(A);
  free(B);
  return 0;
}
