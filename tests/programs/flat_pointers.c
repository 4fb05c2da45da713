// polyflow: compiled=matvec_flat,transpose_flat,stencil_deref,reverse_deref,rank1_update,col_sums_long,scale_float_flat
/* Flat pointer parameters with linearized subscripts p[i*m+k] and *(p + e) dereferences. */
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

void matvec_flat(int n, int m, const double *restrict A, const double *restrict x,
                 double *restrict y) {
  for (int i = 0; i < n; i++) {
    double s = 0.0;
    for (int k = 0; k < m; k++)
      s += A[i * m + k] * x[k];
    y[i] = s;
  }
}

void transpose_flat(int n, int m, double *restrict A, double *restrict T) {
  for (int i = 0; i < n; i++)
    for (int j = 0; j < m; j++)
      *(T + j * n + i) = *(A + i * m + j);
}

void stencil_deref(int n, double *restrict in, double *restrict out) {
  for (int i = 1; i < n - 1; i++)
    *(out + i) = 0.25 * *(in + i - 1) + 0.5 * *(in + i) + 0.25 * *(in + (i + 1));
  *out = *in;
  *(out + n - 1) = *(in + n - 1);
}

void reverse_deref(int n, int *restrict a) {
  for (int i = 0; i < n / 2; i++) {
    int t = *(a + i);
    *(a + i) = *(a + (n - 1 - i));
    *(a + (n - 1 - i)) = t;
  }
}

/* A += u v^T on a row-major n x m matrix with a leading dimension ld >= m */
void rank1_update(int n, int m, int ld, double *restrict A, double *restrict u,
                  double *restrict v) {
  for (int i = 0; i < n; i++)
    for (int j = 0; j < m; j++)
      A[i * ld + j] += u[i] * v[j];
}

void col_sums_long(int n, int m, long *restrict M, long *restrict sums) {
  for (int j = 0; j < m; j++) {
    long s = 0;
    for (int i = 0; i < n; i++)
      s += M[(long)i * m + j];
    sums[j] = s;
  }
}

void scale_float_flat(int n, int m, float *restrict F, float s) {
  for (int i = 0; i < n; i++)
    for (int j = 0; j < m; j++)
      F[i * m + j] = F[i * m + j] * s + (float)j;
}

int main(void) {
  int n = 33, m = 21, ld = 24;
  double *A = malloc(sizeof(double) * n * m);
  double *T = malloc(sizeof(double) * n * m);
  double *x = malloc(sizeof(double) * m);
  double *y = malloc(sizeof(double) * n);
  double *P = malloc(sizeof(double) * n * ld);
  double *u = malloc(sizeof(double) * n);
  long *L = malloc(sizeof(long) * n * m);
  long *sums = malloc(sizeof(long) * m);
  float *F = malloc(sizeof(float) * n * m);
  int *iv = malloc(sizeof(int) * n);
  double *st = malloc(sizeof(double) * n);

  for (int i = 0; i < n; i++) {
    for (int j = 0; j < m; j++) {
      A[i * m + j] = (double)((i * 9 + j * 4) % 15) / 8.0 - 0.75;
      L[i * m + j] = (long)(i * 1000 + j) * 100003L;
      F[i * m + j] = (float)((i + 2 * j) % 10) * 0.1f;
    }
    for (int j = 0; j < ld; j++)
      P[i * ld + j] = j < m ? 1.0 : -7.0;
    u[i] = (double)(i % 3) - 1.0;
    iv[i] = i * i;
  }
  for (int j = 0; j < m; j++)
    x[j] = (double)(j % 4) * 0.5;

  matvec_flat(n, m, A, x, y);
  REPORT_D("matvec_flat", y, n);
  transpose_flat(n, m, A, T);
  REPORT_D("transpose_flat", T, n * m);
  printf("T[5*33+7]=%.15g A[7*21+5]=%.15g\n", T[5 * n + 7], A[7 * m + 5]);
  stencil_deref(n, y, st);
  REPORT_D("stencil_deref", st, n);
  reverse_deref(n, iv);
  printf("reversed: %d %d %d %d\n", iv[0], iv[1], iv[16], iv[32]);
  rank1_update(n, m, ld, P, u, x);
  REPORT_D("rank1 (padding must stay -7)", P, n * ld);
  col_sums_long(n, m, L, sums);
  for (int j = 0; j < m; j += 5)
    printf("colsum[%d]=%ld\n", j, sums[j]);
  scale_float_flat(n, m, F, 1.25f);
  double fs = 0.0;
  for (int i = 0; i < n * m; i++)
    fs += F[i];
  printf("float flat sum=%.15g F[100]=%.8g F[692]=%.8g\n", fs, F[100], F[692]);

  free(A);
  free(T);
  free(x);
  free(y);
  free(P);
  free(u);
  free(L);
  free(sums);
  free(F);
  free(iv);
  free(st);
  return 0;
}
