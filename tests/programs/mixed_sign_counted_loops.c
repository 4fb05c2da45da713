// polyflow: compiled=unsigned_counter_constant_bound,signed_counter_unsigned_bound,negative_start_unsigned_bound,pair_swap,unsigned_counter_negative_bound
/* Counted loops whose comparison mixes signed and unsigned operands (compared as unsigned, C's
   usual arithmetic conversions): a constant bound >= 0 or start >= 0 keeps them counted loops;
   a negative one becomes a huge unsigned value and the loop runs (or not) accordingly. */
#include <stdio.h>
#include <stddef.h>

/* size_t counter, int constant bound (GSL's `k < MULTIPLICITY`) */
double unsigned_counter_constant_bound(const double *x, size_t stride, size_t n) {
  double s = 0;
  for (size_t i = 0; i < n; i++)
    for (size_t k = 0; k < 3; k++)
      s += x[i * stride + k] * (double)(k + 1);
  return s;
}

/* int counter from 0, unsigned bound: compared as unsigned, same trips */
long signed_counter_unsigned_bound(const long *x, unsigned n, unsigned long m) {
  long s = 0;
  for (int i = 0; i < n; i++)
    s += x[i];
  for (int i = 2; i <= m; i += 3)
    s += 7 * x[i - 2];
  return s;
}

/* a start of -1 converted to unsigned is the largest value: the loop never runs */
long negative_start_unsigned_bound(const long *x, unsigned n) {
  long s = 0;
  for (int i = -1; i < n; i++)
    s += x[i + 1];
  return s + 1000;
}

/* GSL's swap of the MULTIPLICITY components of two elements */
void pair_swap(double *data, size_t s, size_t i, size_t j) {
  for (size_t k = 0; k < 2; k++) {
    double tmp = data[j * s + k];
    data[j * s + k] = data[i * s + k];
    data[i * s + k] = tmp;
  }
}

/* a bound of -1 is SIZE_MAX as size_t: the loop runs until its break */
long unsigned_counter_negative_bound(const long *x, size_t n) {
  long s = 0;
  for (size_t k = 0; k < -1; k++) {
    if (k >= n)
      break;
    s += x[k];
  }
  return s;
}

int main(void) {
  double x[64];
  long y[64];
  for (int i = 0; i < 64; i++) {
    x[i] = 0.5 * i - 3.0;
    y[i] = (i * 37) % 11 - 5;
  }
  printf("%.17g\n", unsigned_counter_constant_bound(x, 4, 10));
  printf("%.17g\n", unsigned_counter_constant_bound(x, 3, 0));
  printf("%ld\n", signed_counter_unsigned_bound(y, 20, 40));
  printf("%ld\n", signed_counter_unsigned_bound(y, 0, 1));
  printf("%ld\n", negative_start_unsigned_bound(y, 30));
  pair_swap(x, 2, 3, 7);
  for (int i = 0; i < 20; i++)
    printf("%.17g ", x[i]);
  printf("\n%ld\n", unsigned_counter_negative_bound(y, 25));
  return 0;
}
