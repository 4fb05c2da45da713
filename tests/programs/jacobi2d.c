// polyflow: compiled=init_jacobi,kernel_jacobi_2d,kernel_jacobi_1d
/* PolyBench jacobi-2d and jacobi-1d: time-iterated stencils ping-ponging between two arrays. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N 60
#define TSTEPS 20

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

void init_jacobi(int n, double A[n][n], double B[n][n]) {
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++) {
      A[i][j] = ((double)i * (j + 2) + 2) / n;
      B[i][j] = ((double)i * (j + 3) + 3) / n;
    }
}

void kernel_jacobi_2d(int tsteps, int n, double A[n][n], double B[n][n]) {
  for (int t = 0; t < tsteps; t++) {
    for (int i = 1; i < n - 1; i++)
      for (int j = 1; j < n - 1; j++)
        B[i][j] = 0.2 * (A[i][j] + A[i][j - 1] + A[i][1 + j] + A[1 + i][j] + A[i - 1][j]);
    for (int i = 1; i < n - 1; i++)
      for (int j = 1; j < n - 1; j++)
        A[i][j] = 0.2 * (B[i][j] + B[i][j - 1] + B[i][1 + j] + B[1 + i][j] + B[i - 1][j]);
  }
}

void kernel_jacobi_1d(int tsteps, int n, double *restrict A, double *restrict B) {
  for (int t = 0; t < tsteps; t++) {
    for (int i = 1; i < n - 1; i++)
      B[i] = 0.33333 * (A[i - 1] + A[i] + A[i + 1]);
    for (int i = 1; i < n - 1; i++)
      A[i] = 0.33333 * (B[i - 1] + B[i] + B[i + 1]);
  }
}

int main(void) {
  double (*A)[N] = malloc(sizeof(double) * N * N);
  double (*B)[N] = malloc(sizeof(double) * N * N);
  double *a = malloc(sizeof(double) * 400);
  double *b = malloc(sizeof(double) * 400);

  init_jacobi(N, A, B);
  REPORT_D("A init", &A[0][0], N * N);
  kernel_jacobi_2d(TSTEPS, N, A, B);
  REPORT_D("A", &A[0][0], N * N);
  REPORT_D("B", &B[0][0], N * N);
  printf("A[1][1]=%.15g A[30][30]=%.15g B[58][57]=%.15g\n", A[1][1], A[30][30], B[58][57]);
  for (int i = 0; i < 400; i++) {
    a[i] = ((double)i + 2) / 400;
    b[i] = ((double)i + 3) / 400;
  }
  kernel_jacobi_1d(50, 400, a, b);
  REPORT_D("a 1d", a, 400);
  REPORT_D("b 1d", b, 400);

  free(A);
  free(B);
  free(a);
  free(b);
  return 0;
}
