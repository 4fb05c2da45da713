// polyflow: compiled=make_spd,kernel_cholesky,kernel_trisolv
/* PolyBench cholesky (sqrt on the diagonal, triangular bounds) and trisolv (forward
   substitution with division). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* B = L L^T for a lower-triangular L with a dominant diagonal: symmetric positive definite */
void make_spd(int n, double L[n][n], double B[n][n]) {
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++)
      L[i][j] = j > i ? 0.0 : (i == j ? 2.0 + (double)(i % 3) : (double)((i + 2 * j) % 5) / 10.0);
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++) {
      double s = 0.0;
      for (int k = 0; k < n; k++)
        s += L[i][k] * L[j][k];
      B[i][j] = s;
    }
}

void kernel_cholesky(int n, double A[n][n]) {
  for (int i = 0; i < n; i++) {
    for (int j = 0; j < i; j++) {
      for (int k = 0; k < j; k++)
        A[i][j] -= A[i][k] * A[j][k];
      A[i][j] /= A[j][j];
    }
    for (int k = 0; k < i; k++)
      A[i][i] -= A[i][k] * A[i][k];
    A[i][i] = sqrt(A[i][i]);
  }
}

void kernel_trisolv(int n, double L[n][n], double x[n], double b[n]) {
  for (int i = 0; i < n; i++) {
    x[i] = b[i];
    for (int j = 0; j < i; j++)
      x[i] -= L[i][j] * x[j];
    x[i] = x[i] / L[i][i];
  }
}

int main(void) {
  int n = 40;
  double (*L)[n] = malloc(sizeof(double) * n * n);
  double (*B)[n] = malloc(sizeof(double) * n * n);
  double *x = malloc(sizeof(double) * n);
  double *b = malloc(sizeof(double) * n);
  make_spd(n, L, B);
  REPORT_D("B", &B[0][0], n * n);
  kernel_cholesky(n, B);
  double maxerr = 0.0;
  for (int i = 0; i < n; i++)
    for (int j = 0; j <= i; j++) {
      double e = fabs(B[i][j] - L[i][j]);
      maxerr = e > maxerr ? e : maxerr;
    }
  printf("cholesky max |L - L0| below 1e-12: %d\n", maxerr < 1e-12);
  double lsum = 0.0;
  for (int i = 0; i < n; i++)
    for (int j = 0; j <= i; j++)
      lsum += B[i][j];
  printf("lower sum=%.15g B[0][0]=%.15g B[39][39]=%.15g B[20][7]=%.15g\n", lsum, B[0][0],
         B[n - 1][n - 1], B[20][7]);
  for (int i = 0; i < n; i++)
    b[i] = (double)i - 3.5;
  kernel_trisolv(n, L, x, b);
  REPORT_D("trisolv x", x, n);
  printf("x[0]=%.15g x[39]=%.15g\n", x[0], x[n - 1]);

  free(L);
  free(B);
  free(x);
  free(b);
  return 0;
}
