// polyflow: compiled=all_compound_int,all_compound_double,post_pre_values,compact_positive,histogram_incr,float_compound
/* Every compound assignment operator, and pre/post increment and decrement used as values. */
#include <stdio.h>
#include <stdlib.h>

void all_compound_int(int n, int *restrict a, const int *restrict b) {
  for (int i = 0; i < n; i++) {
    int v = a[i];
    v += b[i];
    v -= 3;
    v *= 2;
    v /= 3;
    v %= 1000;
    v += 1000;
    v <<= 2;
    v >>= 1;
    v &= 0x3ff;
    v |= 0x100;
    v ^= b[i] & 0xff;
    a[i] = v;
    a[i] += i;
    a[i] -= b[i] / 2;
  }
}

void all_compound_double(int n, double *restrict x, const double *restrict y) {
  for (int i = 0; i < n; i++) {
    x[i] += y[i];
    x[i] *= 1.5;
    x[i] -= 0.25 * y[i];
    x[i] /= 2.0 + y[i] * y[i];
  }
}

/* b = a++ yields the old value, c = ++a the new one */
void post_pre_values(int n, int *restrict a, int *restrict b, int *restrict c,
                     int *restrict d) {
  for (int i = 0; i < n; i++) {
    b[i] = a[i]++;
    c[i] = ++a[i];
    int old = a[i]--;
    d[i] = old * 10 + --a[i];
  }
}

/* out[k++] = ... : a data-dependent output index */
int compact_positive(int n, const int *restrict a, int *restrict out) {
  int k = 0;
  for (int i = 0; i < n; i++)
    if (a[i] > 0)
      out[k++] = a[i];
  int j = k;
  while (j > 0)
    out[--j] *= 2;
  return k;
}

void histogram_incr(int n, const int *restrict a, int *restrict h) {
  for (int b = 0; b < 8; b++)
    h[b] = 0;
  for (int i = 0; i < n; i++)
    h[a[i] & 7]++;
  for (int i = 0; i < n; i += 2)
    --h[(a[i] >> 3) & 7];
}

void float_compound(int n, float *restrict f) {
  float acc = 1.0f;
  for (int i = 0; i < n; i++) {
    acc *= 1.03125f;
    acc -= 0.0625f;
    f[i] += acc;
    f[i] /= 3.0f;
  }
}

int main(void) {
  int n = 32;
  int *a = malloc(sizeof(int) * n);
  int *b = malloc(sizeof(int) * n);
  int *c = malloc(sizeof(int) * n);
  int *d = malloc(sizeof(int) * n);
  double *x = malloc(sizeof(double) * n);
  double *y = malloc(sizeof(double) * n);
  float *f = malloc(sizeof(float) * n);
  for (int i = 0; i < n; i++) {
    a[i] = (i * 97) % 1301 - 400;
    b[i] = (i * 13) % 29 - 7;
    x[i] = (double)i * 0.75 - 3.0;
    y[i] = (double)(i % 5) * 0.5;
    f[i] = (float)i * 0.5f;
  }

  all_compound_int(n, a, b);
  for (int i = 0; i < n; i++)
    printf("%d ", a[i]);
  printf("\n");
  all_compound_double(n, x, y);
  for (int i = 0; i < n; i += 4)
    printf("x[%d]=%.15g\n", i, x[i]);
  for (int i = 0; i < n; i++)
    a[i] = i * 3 - 40;
  post_pre_values(n, a, b, c, d);
  for (int i = 0; i < n; i += 5)
    printf("a=%d b=%d c=%d d=%d\n", a[i], b[i], c[i], d[i]);
  for (int i = 0; i < n; i++)
    a[i] = (i * 7) % 11 - 4;
  int k = compact_positive(n, a, c);
  printf("compacted %d:", k);
  for (int i = 0; i < k; i++)
    printf(" %d", c[i]);
  printf("\n");
  for (int i = 0; i < n; i++)
    a[i] = (i * 37 + 5) % 64;
  histogram_incr(n, a, d);
  for (int i = 0; i < 8; i++)
    printf("h[%d]=%d\n", i, d[i]);
  float_compound(n, f);
  for (int i = 0; i < n; i += 8)
    printf("f[%d]=%.8g\n", i, f[i]);

  free(a);
  free(b);
  free(c);
  free(d);
  free(x);
  free(y);
  free(f);
  return 0;
}
