// polyflow: compiled=narrow_unsigned_promote_to_int,long_by_unsigned,float_vs_double_constants,float_times_double_constant,unsigned_to_float,ulong_conversions,float_to_small_unsigned
/* Conversion corners where a front end can pick the wrong signedness or precision: unsigned
   char and short promote to (signed) int, long / unsigned is a signed division, float compared
   with a double constant is compared in double, unsigned to floating point needs an unsigned
   conversion. */
#include <stdio.h>
#include <stdlib.h>

/* uc > -1 is true (int comparison); ~uc is negative; us / -3 is a signed division */
void narrow_unsigned_promote_to_int(int n, const unsigned char *restrict uc,
                                    const unsigned short *restrict us, int *restrict out) {
  for (int i = 0; i < n; i++) {
    int v = (uc[i] > -1) + 2 * (~uc[i] < 0) + 4 * (-uc[i] <= 0) + 8 * (us[i] > -5);
    v += 16 * (us[i] / -3) + 100000 * (us[i] % -7);
    out[i] = v + (-us[i]) / 4;
  }
}

/* long / unsigned converts the unsigned to long: -7L / 2u == -3 */
void long_by_unsigned(int n, const long *restrict l, const unsigned *restrict u,
                      long *restrict q, long *restrict r) {
  for (int i = 0; i < n; i++) {
    q[i] = l[i] / u[i];
    r[i] = l[i] % u[i] + (l[i] < u[i]);
  }
}

/* f == 0.1 compares in double: false for f = 0.1f */
void float_vs_double_constants(int n, const float *restrict f, int *restrict code) {
  for (int i = 0; i < n; i++)
    code[i] = (f[i] == 0.1) + 2 * (f[i] == 0.1f) + 4 * (f[i] < 0.1) + 8 * (f[i] > 0.1) +
              16 * (f[i] >= 0.1f);
}

/* f * 0.1 is a double multiplication rounded to float once, f * 0.1f a float one */
void float_times_double_constant(int n, float *restrict a, float *restrict b) {
  for (int i = 0; i < n; i++) {
    float f = a[i];
    a[i] = f * 0.1;
    b[i] = f * 0.1f;
  }
}

void unsigned_to_float(int n, const unsigned *restrict u, float *restrict f,
                       double *restrict d) {
  for (int i = 0; i < n; i++) {
    f[i] = (float)u[i];
    d[i] = u[i] + 0.5;
  }
}

/* unsigned long values above 2^63 to double and back */
void ulong_conversions(int n, const unsigned long *restrict u, double *restrict d,
                       unsigned long *restrict back) {
  for (int i = 0; i < n; i++) {
    d[i] = (double)u[i];
    back[i] = (unsigned long)(d[i] * 0.75);
  }
}

void float_to_small_unsigned(int n, const float *restrict f, unsigned char *restrict c,
                             unsigned short *restrict s) {
  for (int i = 0; i < n; i++) {
    c[i] = (unsigned char)f[i];
    s[i] = (unsigned short)(f[i] * 200.0f + 150.0f);
  }
}

int main(void) {
  int n = 12;
  unsigned char *uc = malloc(n);
  unsigned short *us = malloc(sizeof(unsigned short) * n);
  int *out = malloc(sizeof(int) * n);
  long *l = malloc(sizeof(long) * n);
  unsigned *u = malloc(sizeof(unsigned) * n);
  long *q = malloc(sizeof(long) * n);
  long *r = malloc(sizeof(long) * n);
  float *f = malloc(sizeof(float) * n);
  float *g = malloc(sizeof(float) * n);
  double *d = malloc(sizeof(double) * n);
  unsigned long *ul = malloc(sizeof(unsigned long) * n);
  unsigned long *back = malloc(sizeof(unsigned long) * n);
  for (int i = 0; i < n; i++) {
    uc[i] = (unsigned char)(i * 23);
    us[i] = (unsigned short)(i * 6007);
    l[i] = (long)(i - 6) * 1000000007L;
    u[i] = 2u + (unsigned)i * 400000000u;
    ul[i] = 9223372036854775808UL + (unsigned long)i * 1234567890123456789UL / 2UL;
  }

  narrow_unsigned_promote_to_int(n, uc, us, out);
  for (int i = 0; i < n; i++)
    printf("%d ", out[i]);
  printf("\n");
  long_by_unsigned(n, l, u, q, r);
  for (int i = 0; i < n; i++)
    printf("%ld/%ld ", q[i], r[i]);
  printf("\n");
  for (int i = 0; i < n; i++)
    f[i] = i % 3 == 0 ? 0.1f : (float)i * 0.05f;
  float_vs_double_constants(n, f, out);
  printf("float_vs_double_constants:");
  for (int i = 0; i < n; i++)
    printf(" %d", out[i]);
  printf("\n");
  for (int i = 0; i < n; i++)
    f[i] = (float)(i * 7 + 1) * 1.37f;
  float_times_double_constant(n, f, g);
  for (int i = 0; i < n; i++)
    printf("%.9g/%.9g ", f[i], g[i]);
  printf("\n");
  unsigned_to_float(n, u, f, d);
  for (int i = 0; i < n; i++)
    printf("%.9g/%.15g ", f[i], d[i]);
  printf("\n");
  ulong_conversions(n, ul, d, back);
  for (int i = 0; i < n; i++)
    printf("%.17g/%lu\n", d[i], back[i]);
  for (int i = 0; i < n; i++)
    f[i] = i == 0 ? -0.75f : (float)i * 23.1f + 0.25f;
  float_to_small_unsigned(n, f, uc, us);
  for (int i = 0; i < n; i++)
    printf("%u/%u ", (unsigned)uc[i], (unsigned)us[i]);
  printf("\n");

  free(uc);
  free(us);
  free(out);
  free(l);
  free(u);
  free(q);
  free(r);
  free(f);
  free(g);
  free(d);
  free(ul);
  free(back);
  return 0;
}
