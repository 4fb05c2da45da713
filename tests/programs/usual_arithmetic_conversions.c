// polyflow: compiled=ternary_result_types,unsigned_with_negative_int,char_vs_uchar_compare,long_vs_unsigned,shift_operand_types,float_to_int_edges
/* The usual arithmetic conversions where the result type is easy to get wrong: ternaries with
   mixed arms, int mixed with unsigned, unsigned mixed with long, char against unsigned char. */
#include <stdio.h>
#include <stdlib.h>

/* c ? 1u : -1 is unsigned (so never negative); c ? 1 : 2.5 is double */
void ternary_result_types(int n, const int *restrict a, long *restrict out, double *restrict d) {
  for (int i = 0; i < n; i++) {
    out[i] = (a[i] > 0 ? 1u : -1) > 0;
    out[i] += 10 * (long)(a[i] > 0 ? 1u : -1);
    d[i] = (a[i] % 2 ? 1 : 2.5) / 2;
    out[i] += (long)((a[i] > 2 ? (short)-3 : 'a') * 100);
  }
}

/* -7 % 3u is (2^32 - 7) % 3; -1 / 2u is 2147483647 */
void unsigned_with_negative_int(int n, const int *restrict a, unsigned *restrict q,
                                unsigned *restrict r) {
  for (int i = 0; i < n; i++) {
    q[i] = a[i] / 2u + a[i] * 3u;
    r[i] = a[i] % 7u;
  }
}

int char_vs_uchar_compare(int n, const char *restrict c, const unsigned char *restrict u) {
  int s = 0;
  for (int i = 0; i < n; i++) {
    s += c[i] < u[i];
    s += 2 * (c[i] == u[i]);
    s += 4 * ((unsigned char)c[i] == u[i]);
  }
  return s;
}

/* unsigned converts to long (no wrap); unsigned mixed with int converts to unsigned */
void long_vs_unsigned(int n, const unsigned *restrict u, const int *restrict a,
                      long *restrict out) {
  for (int i = 0; i < n; i++) {
    long x = u[i];
    out[i] = x - 4000000000L;
    out[i] += (long)(u[i] - (unsigned)a[i] > 100u);
    out[i] += (u[i] + a[i]) % 1000u;
  }
}

/* the shift result has the promoted left operand's type; the right operand's type is irrelevant */
void shift_operand_types(int n, const unsigned char *restrict c, unsigned *restrict out) {
  for (int i = 0; i < n; i++) {
    int s = i % 24;
    out[i] = (unsigned)(c[i] << s) + (c[i] >> (long)(i % 8)) + (1u << (unsigned char)(31 - s));
  }
}

void float_to_int_edges(int n, const double *restrict x, int *restrict out) {
  for (int i = 0; i < n; i++)
    out[i] = (int)x[i] * 100 + (int)(float)x[i] * 10 + (int)(unsigned char)(int)(x[i] * 30.0 + 200.0);
}

int main(void) {
  int n = 16;
  int *a = malloc(sizeof(int) * n);
  long *lo = malloc(sizeof(long) * n);
  double *d = malloc(sizeof(double) * n);
  unsigned *q = malloc(sizeof(unsigned) * n);
  unsigned *r = malloc(sizeof(unsigned) * n);
  char *c = malloc(n);
  unsigned char *u = malloc(n);
  double *x = malloc(sizeof(double) * n);
  int *io = malloc(sizeof(int) * n);
  for (int i = 0; i < n; i++) {
    a[i] = i * 5 - 37;
    c[i] = (char)(i * 17 - 100);
    u[i] = (unsigned char)(i * 17 + 100);
    q[i] = 3999999990u + (unsigned)i * 3u;
    x[i] = (double)i * 0.6234 - 4.9999999;
  }

  ternary_result_types(n, a, lo, d);
  for (int i = 0; i < n; i++)
    printf("%ld/%.15g ", lo[i], d[i]);
  printf("\n");
  long_vs_unsigned(n, q, a, lo);
  for (int i = 0; i < n; i++)
    printf("%ld ", lo[i]);
  printf("\n");
  unsigned_with_negative_int(n, a, q, r);
  for (int i = 0; i < n; i++)
    printf("%u/%u ", q[i], r[i]);
  printf("\n");
  printf("char_vs_uchar_compare=%d\n", char_vs_uchar_compare(n, c, u));
  shift_operand_types(n, u, q);
  for (int i = 0; i < n; i++)
    printf("%u ", q[i]);
  printf("\n");
  float_to_int_edges(n, x, io);
  for (int i = 0; i < n; i++)
    printf("%d ", io[i]);
  printf("\n");

  free(a);
  free(lo);
  free(d);
  free(q);
  free(r);
  free(c);
  free(u);
  free(x);
  free(io);
  return 0;
}
