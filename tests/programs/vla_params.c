// polyflow: compiled=scale_add,transpose,box_sum_3d,int_outer,padded_copy,matmul_vla,frobenius2
/* C99 variable-length array parameters: 2-D, 3-D, int, dimensions that are expressions. */
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

void scale_add(int n, int m, double s, double A[n][m], double B[n][m]) {
  for (int i = 0; i < n; i++)
    for (int j = 0; j < m; j++)
      B[i][j] = s * A[i][j] + B[i][j];
}

void transpose(int n, int m, double A[n][m], double T[m][n]) {
  for (int i = 0; i < n; i++)
    for (int j = 0; j < m; j++)
      T[j][i] = A[i][j];
}

/* 3-D box filter of radius 1 over the interior */
void box_sum_3d(int p, int q, int r, double X[p][q][r], double Y[p][q][r]) {
  for (int i = 1; i < p - 1; i++)
    for (int j = 1; j < q - 1; j++)
      for (int k = 1; k < r - 1; k++) {
        double s = 0.0;
        for (int di = -1; di <= 1; di++)
          for (int dj = -1; dj <= 1; dj++)
            for (int dk = -1; dk <= 1; dk++)
              s += X[i + di][j + dj][k + dk];
        Y[i][j][k] = s / 27.0;
      }
}

void int_outer(int n, int m, const int u[n], const int v[m], int O[n][m]) {
  for (int i = 0; i < n; i++)
    for (int j = 0; j < m; j++)
      O[i][j] = u[i] * v[j] - (i ^ j);
}

/* dimensions given by expressions of the parameters */
void padded_copy(int n, double src[n][n], double dst[n + 2][2 * n]) {
  for (int i = 0; i < n + 2; i++)
    for (int j = 0; j < 2 * n; j++)
      dst[i][j] = 0.0;
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++) {
      dst[i + 1][2 * j] = src[i][j];
      dst[i + 1][2 * j + 1] = -src[i][j];
    }
}

void matmul_vla(int n, int k, int m, double A[n][k], double B[k][m], double C[n][m]) {
  for (int i = 0; i < n; i++)
    for (int j = 0; j < m; j++) {
      double s = 0.0;
      for (int l = 0; l < k; l++)
        s += A[i][l] * B[l][j];
      C[i][j] = s;
    }
}

double frobenius2(int n, int m, double A[n][m]) {
  double s = 0.0;
  for (int i = 0; i < n; i++)
    for (int j = 0; j < m; j++)
      s += A[i][j] * A[i][j];
  return s;
}

int main(void) {
  int n = 19, m = 13, p = 9, q = 8, r = 7;
  double (*A)[m] = malloc(sizeof(double) * n * m);
  double (*B)[m] = malloc(sizeof(double) * n * m);
  double (*T)[n] = malloc(sizeof(double) * m * n);
  double (*C)[n] = malloc(sizeof(double) * n * n);
  double (*X)[q][r] = malloc(sizeof(double) * p * q * r);
  double (*Y)[q][r] = malloc(sizeof(double) * p * q * r);
  int *u = malloc(sizeof(int) * n);
  int *v = malloc(sizeof(int) * m);
  int (*O)[m] = malloc(sizeof(int) * n * m);
  double (*S)[6] = malloc(sizeof(double) * 6 * 6);
  double (*D)[12] = malloc(sizeof(double) * 8 * 12);

  for (int i = 0; i < n; i++) {
    u[i] = i - 9;
    for (int j = 0; j < m; j++) {
      A[i][j] = (double)((i * 7 + j * 3) % 10) / 4.0 - 1.0;
      B[i][j] = (double)(i - j) / 8.0;
    }
  }
  for (int j = 0; j < m; j++)
    v[j] = 2 * j - 5;
  for (int i = 0; i < p; i++)
    for (int j = 0; j < q; j++)
      for (int k = 0; k < r; k++) {
        X[i][j][k] = (double)((i * 4 + j * 2 + k) % 11);
        Y[i][j][k] = -1.0;
      }
  for (int i = 0; i < 6; i++)
    for (int j = 0; j < 6; j++)
      S[i][j] = (double)(i * 6 + j) * 0.5;

  scale_add(n, m, 1.5, A, B);
  REPORT_D("scale_add", &B[0][0], n * m);
  transpose(n, m, B, T);
  REPORT_D("transpose", &T[0][0], m * n);
  printf("T[12][0]=%.15g T[0][18]=%.15g\n", T[12][0], T[0][18]);
  matmul_vla(n, m, n, A, T, C);
  REPORT_D("matmul", &C[0][0], n * n);
  printf("frobenius2(C)=%.15g\n", frobenius2(n, n, C));
  box_sum_3d(p, q, r, X, Y);
  REPORT_D("box_sum_3d", &Y[0][0][0], p * q * r);
  printf("Y[4][4][3]=%.15g Y[0][0][0]=%.15g\n", Y[4][4][3], Y[0][0][0]);
  int_outer(n, m, u, v, O);
  long osum = 0;
  for (int i = 0; i < n; i++)
    for (int j = 0; j < m; j++)
      osum += (long)O[i][j] * (j + 1);
  printf("int_outer weighted=%ld O[18][12]=%d\n", osum, O[18][12]);
  padded_copy(6, S, D);
  for (int i = 0; i < 8; i++) {
    for (int j = 0; j < 12; j++)
      printf(" %g", D[i][j]);
    printf("\n");
  }

  free(A);
  free(B);
  free(T);
  free(C);
  free(X);
  free(Y);
  free(u);
  free(v);
  free(O);
  free(S);
  free(D);
  return 0;
}
