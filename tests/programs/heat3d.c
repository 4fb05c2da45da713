// polyflow: compiled=init_heat,kernel_heat_3d
/* PolyBench heat-3d: a 7-point stencil over 3-D constant-size arrays, iterated in time. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N 16

#define REPORT_D(label, arr, count)                                 \
  do {                                                              \
    double sum_ = 0.0;                                              \
    unsigned long hash_ = 14695981039346656037UL;                   \
    for (long k_ = 0; k_ < (long)(count); k_++) {                   \
      unsigned long bits_;                                          \
      memcpy(&bits_, &(arr)[k_], sizeof bits_);                     \
      sum_ += (arr)[k_];                                            \
      hash_ = (hash_ ^ bits_) * 1099511628211UL;                    \
    }                                                               \
    printf("%s: sum=%.15g hash=%lu\n", (label), sum_, hash_);       \
  } while (0)

void init_heat(double A[N][N][N], double B[N][N][N]) {
  for (int i = 0; i < N; i++)
    for (int j = 0; j < N; j++)
      for (int k = 0; k < N; k++) {
        A[i][j][k] = (double)((i * j + k * k) % 13) * 10 / N;
        B[i][j][k] = A[i][j][k];
      }
}

void kernel_heat_3d(int tsteps, double A[N][N][N], double B[N][N][N]) {
  for (int t = 1; t <= tsteps; t++) {
    for (int i = 1; i < N - 1; i++)
      for (int j = 1; j < N - 1; j++)
        for (int k = 1; k < N - 1; k++)
          B[i][j][k] = 0.125 * (A[i + 1][j][k] - 2.0 * A[i][j][k] + A[i - 1][j][k]) +
                       0.125 * (A[i][j + 1][k] - 2.0 * A[i][j][k] + A[i][j - 1][k]) +
                       0.125 * (A[i][j][k + 1] - 2.0 * A[i][j][k] + A[i][j][k - 1]) + A[i][j][k];
    for (int i = 1; i < N - 1; i++)
      for (int j = 1; j < N - 1; j++)
        for (int k = 1; k < N - 1; k++)
          A[i][j][k] = 0.125 * (B[i + 1][j][k] - 2.0 * B[i][j][k] + B[i - 1][j][k]) +
                       0.125 * (B[i][j + 1][k] - 2.0 * B[i][j][k] + B[i][j - 1][k]) +
                       0.125 * (B[i][j][k + 1] - 2.0 * B[i][j][k] + B[i][j][k - 1]) + B[i][j][k];
  }
}

int main(void) {
  double (*A)[N][N] = malloc(sizeof(double) * N * N * N);
  double (*B)[N][N] = malloc(sizeof(double) * N * N * N);
  init_heat(A, B);
  REPORT_D("A init", &A[0][0][0], N * N * N);
  kernel_heat_3d(20, A, B);
  REPORT_D("A", &A[0][0][0], N * N * N);
  REPORT_D("B", &B[0][0][0], N * N * N);
  printf("A[1][1][1]=%.15g A[8][7][9]=%.15g B[14][14][14]=%.15g\n", A[1][1][1], A[8][7][9],
         B[N - 2][N - 2][N - 2]);
  free(A);
  free(B);
  return 0;
}
