// polyflow: compiled=kernel_atax,kernel_bicg,kernel_mvt,kernel_gesummv
/* PolyBench atax, bicg, mvt and gesummv: matrix-vector kernels with row and column traversals. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define M 38
#define N 42

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

void kernel_atax(int m, int n, double A[m][n], double x[n], double y[n], double tmp[m]) {
  for (int i = 0; i < n; i++)
    y[i] = 0.0;
  for (int i = 0; i < m; i++) {
    tmp[i] = 0.0;
    for (int j = 0; j < n; j++)
      tmp[i] = tmp[i] + A[i][j] * x[j];
    for (int j = 0; j < n; j++)
      y[j] = y[j] + A[i][j] * tmp[i];
  }
}

void kernel_bicg(int m, int n, double A[n][m], double s[m], double q[n], double p[m],
                 double r[n]) {
  for (int i = 0; i < m; i++)
    s[i] = 0.0;
  for (int i = 0; i < n; i++) {
    q[i] = 0.0;
    for (int j = 0; j < m; j++) {
      s[j] = s[j] + r[i] * A[i][j];
      q[i] = q[i] + A[i][j] * p[j];
    }
  }
}

void kernel_mvt(int n, double x1[n], double x2[n], double y1[n], double y2[n], double A[n][n]) {
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++)
      x1[i] = x1[i] + A[i][j] * y1[j];
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++)
      x2[i] = x2[i] + A[j][i] * y2[j];
}

void kernel_gesummv(int n, double alpha, double beta, double A[n][n], double B[n][n],
                    double tmp[n], double x[n], double y[n]) {
  for (int i = 0; i < n; i++) {
    tmp[i] = 0.0;
    y[i] = 0.0;
    for (int j = 0; j < n; j++) {
      tmp[i] = A[i][j] * x[j] + tmp[i];
      y[i] = B[i][j] * x[j] + y[i];
    }
    y[i] = alpha * tmp[i] + beta * y[i];
  }
}

int main(void) {
  double (*A)[N] = malloc(sizeof(double) * M * N);
  double (*At)[M] = malloc(sizeof(double) * N * M);
  double (*S)[N] = malloc(sizeof(double) * N * N);
  double (*S2)[N] = malloc(sizeof(double) * N * N);
  double *x = malloc(sizeof(double) * N);
  double *y = malloc(sizeof(double) * N);
  double *tmp = malloc(sizeof(double) * N);
  double *s = malloc(sizeof(double) * M);
  double *p = malloc(sizeof(double) * M);
  double *q = malloc(sizeof(double) * N);
  double *r = malloc(sizeof(double) * N);
  double *x1 = malloc(sizeof(double) * N);
  double *x2 = malloc(sizeof(double) * N);

  for (int i = 0; i < N; i++) {
    x[i] = 1.0 + (double)i / N;
    r[i] = (double)(i % N) / N;
    x1[i] = (double)(i % N) / N;
    x2[i] = (double)((i + 1) % N) / N;
    for (int j = 0; j < N; j++) {
      S[i][j] = (double)(i * j % N) / N;
      S2[i][j] = (double)((i * j + 1) % N) / N;
    }
  }
  for (int i = 0; i < M; i++) {
    p[i] = (double)(i % M) / M;
    for (int j = 0; j < N; j++) {
      A[i][j] = (double)((i + j) % N) / (5 * M);
      At[j][i] = (double)(j * (i + 1) % N) / N;
    }
  }

  kernel_atax(M, N, A, x, y, tmp);
  REPORT_D("atax y", y, N);
  REPORT_D("atax tmp", tmp, M);
  kernel_bicg(M, N, At, s, q, p, r);
  REPORT_D("bicg s", s, M);
  REPORT_D("bicg q", q, N);
  kernel_mvt(N, x1, x2, x, r, S);
  REPORT_D("mvt x1", x1, N);
  REPORT_D("mvt x2", x2, N);
  kernel_gesummv(N, 1.5, 1.2, S, S2, tmp, x, y);
  REPORT_D("gesummv y", y, N);
  printf("y[0]=%.15g y[41]=%.15g\n", y[0], y[N - 1]);

  free(A);
  free(At);
  free(S);
  free(S2);
  free(x);
  free(y);
  free(tmp);
  free(s);
  free(p);
  free(q);
  free(r);
  free(x1);
  free(x2);
  return 0;
}
