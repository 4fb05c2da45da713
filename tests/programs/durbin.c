// polyflow: compiled=kernel_durbin
/* PolyBench durbin (Levinson-Durbin recursion): a sequential outer loop with a scalar carried
   across iterations, a reversed access r[k-i-1], and a local temporary array. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N 60

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

void kernel_durbin(int n, double r[N], double y[N]) {
  double z[N];
  double alpha, beta, sum;
  y[0] = -r[0];
  beta = 1.0;
  alpha = -r[0];
  for (int k = 1; k < n; k++) {
    beta = (1 - alpha * alpha) * beta;
    sum = 0.0;
    for (int i = 0; i < k; i++)
      sum += r[k - i - 1] * y[i];
    alpha = -(r[k] + sum) / beta;
    for (int i = 0; i < k; i++)
      z[i] = y[i] + alpha * y[k - i - 1];
    for (int i = 0; i < k; i++)
      y[i] = z[i];
    y[k] = alpha;
  }
}

int main(void) {
  double *r = malloc(sizeof(double) * N);
  double *y = malloc(sizeof(double) * N);
  for (int i = 0; i < N; i++)
    r[i] = (double)(N + 1 - i) / (N * 200.0);
  kernel_durbin(N, r, y);
  REPORT_D("y", y, N);
  printf("y[0]=%.15g y[30]=%.15g y[59]=%.15g\n", y[0], y[30], y[N - 1]);
  free(r);
  free(y);
  return 0;
}
