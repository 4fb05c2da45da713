// polyflow: compiled=init_spd,kernel_lu,lu_solve
/* PolyBench lu (in place, no pivoting) on a symmetric positive definite matrix, then forward and
   backward substitution with the factors. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N 64

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

/* a diagonally dominant symmetric matrix, so no pivoting is needed */
void init_spd(int n, double A[n][n]) {
  for (int i = 0; i < n; i++) {
    for (int j = 0; j <= i; j++) {
      double v = (double)(-j % n) / n + 1.0;
      A[i][j] = v;
      A[j][i] = v;
    }
    A[i][i] = (double)n + 1.0;
  }
}

void kernel_lu(int n, double A[n][n]) {
  for (int i = 0; i < n; i++) {
    for (int j = 0; j < i; j++) {
      for (int k = 0; k < j; k++)
        A[i][j] -= A[i][k] * A[k][j];
      A[i][j] /= A[j][j];
    }
    for (int j = i; j < n; j++)
      for (int k = 0; k < i; k++)
        A[i][j] -= A[i][k] * A[k][j];
  }
}

/* solves (L U) x = b with unit-lower L and upper U stored in LU */
void lu_solve(int n, double LU[n][n], double b[n], double y[n], double x[n]) {
  for (int i = 0; i < n; i++) {
    y[i] = b[i];
    for (int j = 0; j < i; j++)
      y[i] -= LU[i][j] * y[j];
  }
  for (int i = n - 1; i >= 0; i--) {
    x[i] = y[i];
    for (int j = i + 1; j < n; j++)
      x[i] -= LU[i][j] * x[j];
    x[i] = x[i] / LU[i][i];
  }
}

int main(void) {
  double (*A)[N] = malloc(sizeof(double) * N * N);
  double *b = malloc(sizeof(double) * N);
  double *y = malloc(sizeof(double) * N);
  double *x = malloc(sizeof(double) * N);
  init_spd(N, A);
  REPORT_D("A init", &A[0][0], N * N);
  kernel_lu(N, A);
  REPORT_D("LU", &A[0][0], N * N);
  printf("LU[1][0]=%.15g LU[63][63]=%.15g LU[10][40]=%.15g\n", A[1][0], A[N - 1][N - 1], A[10][40]);
  for (int i = 0; i < N; i++)
    b[i] = (double)(i + 1) / N / 2.0 + 4.0;
  lu_solve(N, A, b, y, x);
  REPORT_D("y", y, N);
  REPORT_D("x", x, N);
  printf("x[0]=%.15g x[63]=%.15g\n", x[0], x[N - 1]);

  free(A);
  free(b);
  free(y);
  free(x);
  return 0;
}
