// polyflow: compiled=kernel_gramschmidt,orthogonality_defect
/* PolyBench gramschmidt: QR by modified Gram-Schmidt (sqrt, division by a computed norm,
   triangular j > k loops), then a check that Q has orthonormal columns. */
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

void kernel_gramschmidt(int m, int n, double A[m][n], double R[n][n], double Q[m][n]) {
  for (int k = 0; k < n; k++) {
    double nrm = 0.0;
    for (int i = 0; i < m; i++)
      nrm += A[i][k] * A[i][k];
    R[k][k] = sqrt(nrm);
    for (int i = 0; i < m; i++)
      Q[i][k] = A[i][k] / R[k][k];
    for (int j = k + 1; j < n; j++) {
      R[k][j] = 0.0;
      for (int i = 0; i < m; i++)
        R[k][j] += Q[i][k] * A[i][j];
      for (int i = 0; i < m; i++)
        A[i][j] = A[i][j] - Q[i][k] * R[k][j];
    }
  }
}

double orthogonality_defect(int m, int n, double Q[m][n]) {
  double worst = 0.0;
  for (int a = 0; a < n; a++)
    for (int b = 0; b < n; b++) {
      double s = 0.0;
      for (int i = 0; i < m; i++)
        s += Q[i][a] * Q[i][b];
      double d = fabs(s - (a == b ? 1.0 : 0.0));
      worst = fmax(worst, d);
    }
  return worst;
}

int main(void) {
  int m = 30, n = 20;
  double (*A)[n] = malloc(sizeof(double) * m * n);
  double (*R)[n] = malloc(sizeof(double) * n * n);
  double (*Q)[n] = malloc(sizeof(double) * m * n);
  for (int i = 0; i < m; i++)
    for (int j = 0; j < n; j++) {
      A[i][j] = ((double)((i * j) % m) / m) * 100 + 10 + (i == j ? 5.0 : 0.0);
      Q[i][j] = 0.0;
    }
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++)
      R[i][j] = 0.0;
  kernel_gramschmidt(m, n, A, R, Q);
  REPORT_D("R", &R[0][0], n * n);
  REPORT_D("Q", &Q[0][0], m * n);
  printf("R[0][0]=%.15g R[5][12]=%.15g Q[29][19]=%.15g\n", R[0][0], R[5][12], Q[m - 1][n - 1]);
  printf("orthogonality defect below 1e-9: %d\n", orthogonality_defect(m, n, Q) < 1e-9);
  free(A);
  free(R);
  free(Q);
  return 0;
}
