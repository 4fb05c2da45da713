// polyflow: compiled=lower_matvec,syrk_lower,strict_upper_sum,shrinking_middle,banded_smooth,diagonal_wavefront
/* Loop bounds that depend on outer indices: triangles, shrinking ranges, bands clipped by min/max. */
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

void lower_matvec(int n, double L[n][n], double x[n], double y[n]) {
  for (int i = 0; i < n; i++) {
    y[i] = 0.0;
    for (int j = 0; j <= i; j++)
      y[i] += L[i][j] * x[j];
  }
}

void syrk_lower(int n, int m, double alpha, double C[n][n], double A[n][m]) {
  for (int i = 0; i < n; i++) {
    for (int j = 0; j <= i; j++)
      C[i][j] *= 0.5;
    for (int k = 0; k < m; k++)
      for (int j = 0; j <= i; j++)
        C[i][j] += alpha * A[i][k] * A[j][k];
  }
}

long strict_upper_sum(int n, int A[n][n]) {
  long s = 0;
  for (int i = 0; i < n; i++)
    for (int j = i + 1; j < n; j++)
      s += A[i][j] * (j - i);
  return s;
}

/* the inner range is empty once i passes n/2 */
void shrinking_middle(int n, int A[n][n]) {
  for (int i = 0; i < n; i++)
    for (int j = i; j < n - i; j++)
      A[i][j] += i + 2 * j;
}

/* a band of half-width 2 clipped at both ends with ternaries in the bounds */
void banded_smooth(int n, double in[n], double out[n]) {
  for (int i = 0; i < n; i++) {
    double s = 0.0;
    int lo = i > 2 ? i - 2 : 0;
    int hi = i + 3 < n ? i + 3 : n;
    for (int j = lo; j < hi; j++)
      s += in[j];
    out[i] = s / (double)(hi - lo);
  }
}

/* anti-diagonal sweep: d = i + j, bounds are max/min of affine expressions */
void diagonal_wavefront(int n, double W[n][n]) {
  for (int d = 1; d <= 2 * (n - 1); d++) {
    int ilo = d - (n - 1) > 1 ? d - (n - 1) : 1;
    int ihi = d - 1 < n - 1 ? d - 1 : n - 1;
    for (int i = ilo; i <= ihi; i++) {
      int j = d - i;
      if (j >= 1)
        W[i][j] = 0.5 * W[i - 1][j] + 0.25 * W[i][j - 1] + 0.125;
    }
  }
}

int main(void) {
  int n = 40, m = 24;
  double (*L)[n] = malloc(sizeof(double) * n * n);
  double (*C)[n] = malloc(sizeof(double) * n * n);
  double (*A)[m] = malloc(sizeof(double) * n * m);
  double (*W)[n] = malloc(sizeof(double) * n * n);
  int (*I)[n] = malloc(sizeof(int) * n * n);
  double *x = malloc(sizeof(double) * n);
  double *y = malloc(sizeof(double) * n);

  for (int i = 0; i < n; i++) {
    x[i] = (double)(i % 5) * 0.25 - 0.5 + (double)i / 64.0;
    for (int j = 0; j < n; j++) {
      L[i][j] = (double)((i * 3 + j * 7) % 13) / 16.0;
      C[i][j] = (double)((i + j) % 4);
      W[i][j] = (i == 0 || j == 0) ? (double)(i + j) / 8.0 : 0.0;
      I[i][j] = (i * 5 + j * 11) % 23 - 11;
    }
    for (int k = 0; k < m; k++)
      A[i][k] = (double)((i * k + 1) % 9) / 4.0;
  }

  lower_matvec(n, L, x, y);
  REPORT_D("lower_matvec y", y, n);
  syrk_lower(n, m, 0.75, C, A);
  REPORT_D("syrk C", &C[0][0], n * n);
  printf("strict_upper_sum = %ld\n", strict_upper_sum(n, I));
  shrinking_middle(n, I);
  long isum = 0;
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++)
      isum += (long)I[i][j] * (i + 1);
  printf("shrinking_middle weighted = %ld, I[3][30] = %d, I[30][3] = %d\n", isum, I[3][30], I[30][3]);
  banded_smooth(n, x, y);
  for (int i = 0; i < 6; i++)
    printf("smooth[%d] = %.15g\n", i, y[i]);
  printf("smooth[%d] = %.15g\n", n - 1, y[n - 1]);
  REPORT_D("banded_smooth", y, n);
  diagonal_wavefront(n, W);
  REPORT_D("wavefront", &W[0][0], n * n);
  printf("W[1][1]=%.15g W[%d][%d]=%.15g\n", W[1][1], n - 1, n - 1, W[n - 1][n - 1]);

  free(L);
  free(C);
  free(A);
  free(W);
  free(I);
  free(x);
  free(y);
  return 0;
}
