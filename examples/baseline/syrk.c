/* syrk: lower triangle of C = alpha * A * A^T + beta * C (triangular loop bounds).
 * Times only kernel_syrk. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define N 1000
#define M 800

void init_array(int n, int m, double C[n][n], double A[n][m]) {
  for (int i = 0; i < n; i++)
    for (int j = 0; j < m; j++)
      A[i][j] = (double)((i * j + 1) % n) / n;
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++)
      C[i][j] = (double)((i * j + 2) % m) / m;
}

void kernel_syrk(int n, int m, double alpha, double beta, double C[n][n], double A[n][m]) {
  for (int i = 0; i < n; i++) {
    for (int j = 0; j <= i; j++)
      C[i][j] *= beta;
    for (int k = 0; k < m; k++)
      for (int j = 0; j <= i; j++)
        C[i][j] += alpha * A[i][k] * A[j][k];
  }
}

double checksum(int n, double C[n][n]) {
  double s = 0.0;
  for (int i = 0; i < n; i++)
    for (int j = 0; j <= i; j++)
      s += C[i][j];
  return s;
}

int main(void) {
  double (*A)[M] = malloc(sizeof(double[N][M]));
  double (*C)[N] = malloc(sizeof(double[N][N]));
  if (!A || !C) {
    fprintf(stderr, "out of memory\n");
    return 1;
  }
  init_array(N, M, C, A);

  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  kernel_syrk(N, M, 1.5, 1.2, C, A);
  clock_gettime(CLOCK_MONOTONIC, &t1);

  printf("time: %.6f\n", (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec));
  printf("checksum: %.12e\n", checksum(N, C));
  free(A);
  free(C);
  return 0;
}
