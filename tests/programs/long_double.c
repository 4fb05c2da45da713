// polyflow: compiled=mean_recurrence,weighted_variance,scale_rows,literals,conversions,horner,global_sum,compare_and_select,classify
/* long double (x86-64: the x87 80-bit format) in compiled functions: accumulators of GSL's
   statistics, arrays of long double, literals with an L suffix that no double can hold exactly,
   conversions to and from every other arithmetic type, a global, parameters and results. */
#include <stdio.h>
#include <stddef.h>
#include <math.h>

/* GSL's mean: mean_(n) = mean(n-1) + (data[n] - mean(n-1))/(n+1), in long double */
double mean_recurrence(const double data[], const size_t stride, const size_t size) {
  long double mean = 0;
  for (size_t i = 0; i < size; i++)
    mean += (data[i * stride] - mean) / (i + 1);
  return mean;
}

double weighted_variance(const double w[], const double data[], size_t n, double wmean) {
  long double wvariance = 0, W = 0;
  for (size_t i = 0; i < n; i++) {
    double wi = w[i];
    if (wi > 0) {
      const long double delta = data[i] - wmean;
      W += wi;
      wvariance += (delta * delta - wvariance) * (wi / W);
    }
  }
  return wvariance;
}

void scale_rows(size_t m, size_t n, long double a[m][n], const long double s[m]) {
  for (size_t i = 0; i < m; i++)
    for (size_t j = 0; j < n; j++)
      a[i][j] = a[i][j] * s[i] + 0.1L * (long double)j;
}

long double literals(int k) {
  long double x = 0.1L + 1e-30L - 0x1.8p-3L + 3.0L / 7;
  for (int i = 0; i < k; i++)
    x = x * 1.0000000000000000001L + 0.3L;
  return x;
}

long conversions(int n, const int *iv, const unsigned long *uv, const float *fv, long double *out) {
  long acc = 0;
  for (int i = 0; i < n; i++) {
    long double a = iv[i];
    long double b = uv[i];
    long double c = fv[i];
    out[i] = a / 3 + b + c;
    acc += (long)(out[i] / 1e6L);
    acc += (long)((unsigned long)(b / 2) % 97);
    acc += (long)(c * 4) + (long)((float)(a / 7) * 2);
  }
  return acc;
}

long double horner(int n, const long double *coef, long double x) {
  long double y = 0;
  for (int i = n - 1; i >= 0; i--)
    y = y * x + coef[i];
  return y;
}

long double total = 0.5L;

void global_sum(int n, const double *v) {
  for (int i = 0; i < n; i++)
    total += v[i] * (long double)v[i];
}

int compare_and_select(int n, const long double *x, const double *y, long double *z) {
  int count = 0;
  for (int i = 0; i < n; i++) {
    z[i] = x[i] < y[i] ? x[i] - y[i] : -(x[i] + y[i]);
    count += (x[i] == (long double)y[i]) + 2 * (x[i] > y[i]);
  }
  return count + (int)sizeof(long double);
}

/* isfinite/isinf/isnan take any floating type: 1e4000L is finite, no double holds it */
int classify(int n, const long double *x, int *out) {
  int c = 0;
  for (int i = 0; i < n; i++) {
    out[i] = isfinite(x[i]) + 2 * isinf(x[i]) + 8 * isnan(x[i]);
    c += out[i];
  }
  return c;
}

int main(void) {
  double data[40], w[40];
  for (int i = 0; i < 40; i++) {
    data[i] = 1.0 / (i + 3) + (i % 5) * 1e6;
    w[i] = (i % 7) - 1.5;
  }
  printf("%.17g\n", mean_recurrence(data, 1, 40));
  printf("%.17g\n", mean_recurrence(data, 3, 13));
  double wm = mean_recurrence(data, 1, 40);
  printf("%.17g\n", weighted_variance(w, data, 40, wm));

  long double a[3][5], s[3] = {1.0L / 3, -2.5L, 1e-300L};
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 5; j++)
      a[i][j] = (i + 1) * 0.7L - j;
  scale_rows(3, 5, a, s);
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 5; j++)
      printf("%.21Lg\n", a[i][j]);

  printf("%.21Lg\n%.21Lg\n", literals(0), literals(17));

  int iv[6] = {0, -7, 123456789, -2147483647 - 1, 5, 99};
  unsigned long uv[6] = {0, 1, 18446744073709551615UL, 9223372036854775809UL, 12345, 3};
  float fv[6] = {0.0f, -1.5f, 3.25e10f, 1e-20f, 7.0f, -0.0f};
  long double out[6];
  printf("%ld\n", conversions(6, iv, uv, fv, out));
  for (int i = 0; i < 6; i++)
    printf("%.21Lg\n", out[i]);

  long double coef[5] = {1, -0.5L, 1.0L / 6, -1.0L / 24, 1.0L / 120};
  printf("%.21Lg %.21Lg\n", horner(5, coef, 0.75L), horner(0, coef, 2));

  global_sum(40, data);
  printf("%.21Lg\n", total);

  long double x[6] = {1, 2.5L, -3, 0.1L, 4, 1e4000L};
  double y[6] = {1, 2, -2, 0.1, 5, 1e300};
  long double z[6];
  printf("%d\n", compare_and_select(6, x, y, z));
  for (int i = 0; i < 6; i++)
    printf("%.21Lg\n", z[i]);

  long double big[5] = {1e4000L, -1e4000L * 1e4000L, 0.0L, 1.0L / 3, 0};
  big[4] = big[1] - big[1];
  int kinds[5];
  printf("%d:", classify(5, big, kinds));
  for (int i = 0; i < 5; i++)
    printf(" %d", kinds[i]);
  printf("\n");
  return 0;
}
