// polyflow: compiled=kernel_correlation,kernel_covariance
/* PolyBench correlation and covariance: column means and standard deviations (sqrt, a guarded
   division through a ternary), triangular symmetric output. */
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

void kernel_correlation(int m, int n, double float_n, double data[n][m], double corr[m][m],
                        double mean[m], double stddev[m]) {
  double eps = 0.1;
  for (int j = 0; j < m; j++) {
    mean[j] = 0.0;
    for (int i = 0; i < n; i++)
      mean[j] += data[i][j];
    mean[j] /= float_n;
  }
  for (int j = 0; j < m; j++) {
    stddev[j] = 0.0;
    for (int i = 0; i < n; i++)
      stddev[j] += (data[i][j] - mean[j]) * (data[i][j] - mean[j]);
    stddev[j] /= float_n;
    stddev[j] = sqrt(stddev[j]);
    stddev[j] = stddev[j] <= eps ? 1.0 : stddev[j];
  }
  for (int i = 0; i < n; i++)
    for (int j = 0; j < m; j++) {
      data[i][j] -= mean[j];
      data[i][j] /= sqrt(float_n) * stddev[j];
    }
  for (int i = 0; i < m - 1; i++) {
    corr[i][i] = 1.0;
    for (int j = i + 1; j < m; j++) {
      corr[i][j] = 0.0;
      for (int k = 0; k < n; k++)
        corr[i][j] += data[k][i] * data[k][j];
      corr[j][i] = corr[i][j];
    }
  }
  corr[m - 1][m - 1] = 1.0;
}

void kernel_covariance(int m, int n, double float_n, double data[n][m], double cov[m][m],
                       double mean[m]) {
  for (int j = 0; j < m; j++) {
    mean[j] = 0.0;
    for (int i = 0; i < n; i++)
      mean[j] += data[i][j];
    mean[j] /= float_n;
  }
  for (int i = 0; i < n; i++)
    for (int j = 0; j < m; j++)
      data[i][j] -= mean[j];
  for (int i = 0; i < m; i++)
    for (int j = i; j < m; j++) {
      cov[i][j] = 0.0;
      for (int k = 0; k < n; k++)
        cov[i][j] += data[k][i] * data[k][j];
      cov[i][j] /= (float_n - 1.0);
      cov[j][i] = cov[i][j];
    }
}

int main(void) {
  int m = 28, n = 32;
  double (*data)[m] = malloc(sizeof(double) * n * m);
  double (*corr)[m] = malloc(sizeof(double) * m * m);
  double *mean = malloc(sizeof(double) * m);
  double *stddev = malloc(sizeof(double) * m);
  for (int i = 0; i < n; i++)
    for (int j = 0; j < m; j++)
      data[i][j] = j == 5 ? 2.0 : (double)(i * j) / m + i + (double)((i * i + 3 * j) % 5) * 0.5;
  kernel_correlation(m, n, (double)n, data, corr, mean, stddev);
  REPORT_D("corr", &corr[0][0], m * m);
  REPORT_D("mean", mean, m);
  REPORT_D("stddev", stddev, m);
  printf("corr[0][1]=%.15g corr[3][20]=%.15g stddev[5]=%.15g\n", corr[0][1], corr[3][20], stddev[5]);
  for (int i = 0; i < n; i++)
    for (int j = 0; j < m; j++)
      data[i][j] = (double)(i * j) / m + (double)((i + j) % 7);
  kernel_covariance(m, n, (double)n, data, corr, mean);
  REPORT_D("cov", &corr[0][0], m * m);
  printf("cov[0][0]=%.15g cov[10][27]=%.15g\n", corr[0][0], corr[10][27]);
  free(data);
  free(corr);
  free(mean);
  free(stddev);
  return 0;
}
