// polyflow: compiled=double_to_int_trunc,int_to_float_rounding,narrowing_unsigned_char,mixed_sign_compare,long_double_roundtrip,implicit_conversions,double_to_unsigned
/* Explicit and implicit conversions among int, long, unsigned, char, short, float and double. */
#include <stdio.h>
#include <stdlib.h>

/* (int) truncates toward zero, also for negative values */
void double_to_int_trunc(int n, const double *restrict x, int *restrict out) {
  for (int i = 0; i < n; i++)
    out[i] = (int)x[i] + (int)(x[i] * 10.0) % 7;
}

/* int -> float rounds to nearest even above 2^24; float -> int back */
void int_to_float_rounding(int n, const int *restrict v, float *restrict f, int *restrict back) {
  for (int i = 0; i < n; i++) {
    f[i] = (float)v[i];
    back[i] = (int)f[i] - v[i];
  }
}

/* conversion to unsigned char is modulo 256 */
void narrowing_unsigned_char(int n, const int *restrict v, unsigned char *restrict c,
                             short *restrict s) {
  for (int i = 0; i < n; i++) {
    c[i] = (unsigned char)v[i];
    s[i] = (short)(v[i] % 30000);
  }
}

/* -1 + 0u < 1u is false: the int converts to unsigned */
int mixed_sign_compare(int n, const int *restrict a, const unsigned *restrict b) {
  int c = 0;
  for (int i = 0; i < n; i++) {
    if (a[i] + 0u < b[i])
      c += 1;
    if ((long)a[i] < (long)b[i])
      c += 100;
  }
  return c;
}

double long_double_roundtrip(int n, const long *restrict a) {
  double s = 0.0;
  for (int i = 0; i < n; i++) {
    double d = (double)a[i];
    long back = (long)d;
    s += (double)(a[i] - back) + d * 1e-15;
  }
  return s;
}

/* assignments and arithmetic that convert without casts */
void implicit_conversions(int n, const int *restrict iv, double *restrict d, float *restrict f,
                          long *restrict l) {
  for (int i = 0; i < n; i++) {
    double x = iv[i];
    float y = x / 3;
    long z = iv[i] * 100000L;
    int w = y;
    d[i] = x / 4 + iv[i] / 4;
    f[i] = y + w;
    l[i] = z + w + (iv[i] > 0 ? 1u : 2u);
  }
}

unsigned double_to_unsigned(double x) {
  unsigned u = (unsigned)x;
  return u / 7u + u % 7u;
}

int main(void) {
  int n = 24;
  double *x = malloc(sizeof(double) * n);
  int *iv = malloc(sizeof(int) * n);
  int *out = malloc(sizeof(int) * n);
  float *f = malloc(sizeof(float) * n);
  unsigned char *c = malloc(n);
  short *s = malloc(sizeof(short) * n);
  unsigned *u = malloc(sizeof(unsigned) * n);
  long *l = malloc(sizeof(long) * n);
  double *d = malloc(sizeof(double) * n);

  for (int i = 0; i < n; i++)
    x[i] = (double)(i - 12) * 0.37 + 0.01;
  double_to_int_trunc(n, x, out);
  for (int i = 0; i < n; i++)
    printf("%d ", out[i]);
  printf("\n");

  for (int i = 0; i < n; i++)
    iv[i] = 16777216 + i * 3 - 20;
  int_to_float_rounding(n, iv, f, out);
  for (int i = 0; i < n; i++)
    printf("%.8g:%d ", f[i], out[i]);
  printf("\n");

  for (int i = 0; i < n; i++)
    iv[i] = i * 4567 - 50000;
  narrowing_unsigned_char(n, iv, c, s);
  for (int i = 0; i < n; i++)
    printf("%u/%d ", (unsigned)c[i], (int)s[i]);
  printf("\n");

  for (int i = 0; i < n; i++) {
    iv[i] = i - 12;
    u[i] = (unsigned)(i * 3);
  }
  printf("mixed_sign_compare=%d\n", mixed_sign_compare(n, iv, u));

  for (int i = 0; i < n; i++)
    l[i] = (1L << 53) + (long)i * 12345L + (long)(i % 3);
  printf("long_double_roundtrip=%.15g\n", long_double_roundtrip(n, l));

  for (int i = 0; i < n; i++)
    iv[i] = (i * 11) % 37 - 18;
  implicit_conversions(n, iv, d, f, l);
  for (int i = 0; i < n; i++)
    printf("%.15g %.8g %ld\n", d[i], f[i], l[i]);

  printf("double_to_unsigned: %u %u %u\n", double_to_unsigned(3000000000.75),
         double_to_unsigned(12.9), double_to_unsigned(4294967294.0));

  free(x);
  free(iv);
  free(out);
  free(f);
  free(c);
  free(s);
  free(u);
  free(l);
  free(d);
  return 0;
}
