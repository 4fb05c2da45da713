/* heat3d: TSTEPS double sweeps of a 7-point 3D heat stencil. Times only kernel_heat3d. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define N 120
#define TSTEPS 40

void init_array(double A[N][N][N], double B[N][N][N]) {
  for (int i = 0; i < N; i++)
    for (int j = 0; j < N; j++)
      for (int k = 0; k < N; k++) {
        A[i][j][k] = (double)((i * j + 3 * k) % N + 1) / N;
        B[i][j][k] = A[i][j][k];
      }
}

void kernel_heat3d(double A[N][N][N], double B[N][N][N]) {
  for (int t = 1; t <= TSTEPS; t++) {
    for (int i = 1; i < N - 1; i++)
      for (int j = 1; j < N - 1; j++)
        for (int k = 1; k < N - 1; k++)
          B[i][j][k] = 0.125 * (A[i + 1][j][k] - 2.0 * A[i][j][k] + A[i - 1][j][k])
                     + 0.125 * (A[i][j + 1][k] - 2.0 * A[i][j][k] + A[i][j - 1][k])
                     + 0.125 * (A[i][j][k + 1] - 2.0 * A[i][j][k] + A[i][j][k - 1])
                     + A[i][j][k];
    for (int i = 1; i < N - 1; i++)
      for (int j = 1; j < N - 1; j++)
        for (int k = 1; k < N - 1; k++)
          A[i][j][k] = 0.125 * (B[i + 1][j][k] - 2.0 * B[i][j][k] + B[i - 1][j][k])
                     + 0.125 * (B[i][j + 1][k] - 2.0 * B[i][j][k] + B[i][j - 1][k])
                     + 0.125 * (B[i][j][k + 1] - 2.0 * B[i][j][k] + B[i][j][k - 1])
                     + B[i][j][k];
  }
}

double checksum(double A[N][N][N]) {
  double s = 0.0;
  for (int i = 0; i < N; i++)
    for (int j = 0; j < N; j++)
      for (int k = 0; k < N; k++)
        s += A[i][j][k];
  return s;
}

int main(void) {
  double (*A)[N][N] = malloc(sizeof(double[N][N][N]));
  double (*B)[N][N] = malloc(sizeof(double[N][N][N]));
  if (!A || !B) {
    fprintf(stderr, "out of memory\n");
    return 1;
  }
  init_array(A, B);

  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  kernel_heat3d(A, B);
  clock_gettime(CLOCK_MONOTONIC, &t1);

  printf("time: %.6f\n", (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec));
  printf("checksum: %.12e\n", checksum(A));
  free(A);
  free(B);
  return 0;
}
