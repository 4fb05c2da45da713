// polyflow: compiled=nan_compare_bits,minmax_with_nan,ternary_max_with_nan,negate_zero,inf_arith,rounding_signed_zero,float_nan_compare_bits
/* IEEE special values: NaN in every comparison operator (C's != is true for NaN), fmin/fmax
   ignoring a NaN operand, signed zeros from negation and rounding, infinities from overflow.
   NaNs are never printed (their sign is not portable), only what is computed from them. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

/* one bit per comparison: < <= > >= == != and their negations */
int nan_compare_bits(double a, double b) {
  int bits = 0;
  bits |= (a < b) << 0;
  bits |= (a <= b) << 1;
  bits |= (a > b) << 2;
  bits |= (a >= b) << 3;
  bits |= (a == b) << 4;
  bits |= (a != b) << 5;
  bits |= !(a < b) << 6;
  bits |= !(a >= b) << 7;
  bits |= (a != a) << 8;
  bits |= (a == a) << 9;
  if (a < b || a == b)
    bits |= 1 << 10;
  if (!(a > b) && !(a == b))
    bits |= 1 << 11;
  return bits;
}

int float_nan_compare_bits(float a, float b) {
  int bits = 0;
  bits |= (a < b) << 0;
  bits |= (a <= b) << 1;
  bits |= (a > b) << 2;
  bits |= (a >= b) << 3;
  bits |= (a == b) << 4;
  bits |= (a != b) << 5;
  return bits;
}

/* fmin(NaN, x) and fmax(NaN, x) return x */
void minmax_with_nan(int n, const double *restrict x, const double *restrict y,
                     double *restrict lo, double *restrict hi) {
  for (int i = 0; i < n; i++) {
    lo[i] = fmin(x[i], y[i]);
    hi[i] = fmax(y[i], x[i]);
  }
}

/* a > b ? a : b picks b whenever a comparison involves NaN; returns how many NaNs came out */
int ternary_max_with_nan(int n, const double *restrict x, const double *restrict y,
                         double *restrict out) {
  int nans = 0;
  for (int i = 0; i < n; i++) {
    out[i] = x[i] > y[i] ? x[i] : y[i];
    if (out[i] != out[i]) {
      nans++;
      out[i] = -7.0;
    }
  }
  return nans;
}

/* -x of +0.0 is -0.0, but 0.0 - x is +0.0 */
void negate_zero(int n, const double *restrict x, double *restrict neg, double *restrict sub) {
  for (int i = 0; i < n; i++) {
    neg[i] = -x[i];
    sub[i] = 0.0 - x[i];
  }
}

/* exp overflows to +inf, log(0) is -inf, inf - inf would be NaN and is detected */
void inf_arith(int n, const double *restrict x, double *restrict e, int *restrict flags) {
  for (int i = 0; i < n; i++) {
    e[i] = exp(x[i]);
    double l = log(x[i] > 0.0 ? x[i] : 0.0);
    double d = e[i] - e[i];
    flags[i] = (e[i] > 1e308) + 2 * (l < -1e308) + 4 * (d != d) + 8 * (tanh(e[i]) == 1.0);
  }
}

void rounding_signed_zero(int n, const double *restrict x, double *restrict c,
                          float *restrict f) {
  for (int i = 0; i < n; i++) {
    c[i] = ceil(x[i]);
    f[i] = floorf(-(float)x[i]) * 0.0f;
  }
}

int main(void) {
  int n = 8;
  double *x = malloc(sizeof(double) * n);
  double *y = malloc(sizeof(double) * n);
  double *lo = malloc(sizeof(double) * n);
  double *hi = malloc(sizeof(double) * n);
  float *f = malloc(sizeof(float) * n);
  int *flags = malloc(sizeof(int) * n);
  double neg_one = -1.0 - (double)n * 0.0;
  double nan = sqrt(neg_one);
  float fnan = sqrtf((float)neg_one);

  printf("nan_compare_bits(nan, 1)=%d\n", nan_compare_bits(nan, 1.0));
  printf("nan_compare_bits(1, nan)=%d\n", nan_compare_bits(1.0, nan));
  printf("nan_compare_bits(nan, nan)=%d\n", nan_compare_bits(nan, nan));
  printf("nan_compare_bits(1, 2)=%d\n", nan_compare_bits(1.0, 2.0));
  printf("nan_compare_bits(2, 2)=%d\n", nan_compare_bits(2.0, 2.0));
  printf("nan_compare_bits(-0, 0)=%d\n", nan_compare_bits(-0.0, 0.0));
  printf("float_nan_compare_bits: %d %d %d\n", float_nan_compare_bits(fnan, 1.0f),
         float_nan_compare_bits(2.0f, fnan), float_nan_compare_bits(1.0f, 1.0f));

  for (int i = 0; i < n; i++) {
    x[i] = i % 3 == 0 ? nan : (double)i - 3.5;
    y[i] = i % 4 == 1 ? nan : 2.0 - (double)i;
  }
  minmax_with_nan(n, x, y, lo, hi);
  for (int i = 0; i < n; i++) {
    printf("fmin/fmax[%d]: ", i);
    if (lo[i] != lo[i])
      printf("NaN ");
    else
      printf("%.15g ", lo[i]);
    if (hi[i] != hi[i])
      printf("NaN\n");
    else
      printf("%.15g\n", hi[i]);
  }
  int nans = ternary_max_with_nan(n, x, y, lo);
  printf("ternary max nans=%d:", nans);
  for (int i = 0; i < n; i++)
    printf(" %.15g", lo[i]);
  printf("\n");

  for (int i = 0; i < n; i++)
    x[i] = (double)(i - 2) * 0.5 * (double)(i % 2);
  negate_zero(n, x, lo, hi);
  for (int i = 0; i < n; i++)
    printf("x=%.15g -x=%.15g 0-x=%.15g\n", x[i], lo[i], hi[i]);

  for (int i = 0; i < n; i++)
    x[i] = (double)(i * 200) - 200.0;
  inf_arith(n, x, lo, flags);
  for (int i = 0; i < n; i++)
    printf("exp(%.15g)=%.15g flags=%d\n", x[i], lo[i], flags[i]);

  for (int i = 0; i < n; i++)
    x[i] = (double)(i - 4) * 0.375;
  rounding_signed_zero(n, x, lo, f);
  for (int i = 0; i < n; i++)
    printf("ceil(%.15g)=%.15g f=%.8g\n", x[i], lo[i], f[i]);

  free(x);
  free(y);
  free(lo);
  free(hi);
  free(f);
  free(flags);
  return 0;
}
