// polyflow: compiled=fnv1a_bytes,lcg_fill,wrap_sub,unsigned_div_mod,unsigned_shifts,unsigned_to_double,uchar_wrap,ulong_mix
/* Unsigned arithmetic with well-defined wrap-around, unsigned division, shifts and compares. */
#include <stdio.h>
#include <stdlib.h>

unsigned fnv1a_bytes(int n, const unsigned char *restrict b) {
  unsigned h = 2166136261u;
  for (int i = 0; i < n; i++) {
    h ^= b[i];
    h *= 16777619u;
  }
  return h;
}

void lcg_fill(int n, unsigned seed, unsigned *restrict out) {
  unsigned x = seed;
  for (int i = 0; i < n; i++) {
    x = x * 1664525u + 1013904223u;
    out[i] = x;
  }
}

/* a - b wraps below zero; the comparison sees the huge value */
int wrap_sub(int n, const unsigned *restrict a, const unsigned *restrict b,
             unsigned *restrict d) {
  int big = 0;
  for (int i = 0; i < n; i++) {
    d[i] = a[i] - b[i];
    if (d[i] > 2147483648u)
      big++;
  }
  return big;
}

void unsigned_div_mod(int n, const unsigned *restrict a, unsigned *restrict q,
                      unsigned *restrict r) {
  for (int i = 0; i < n; i++) {
    unsigned d = (a[i] & 0xffu) + 1u;
    q[i] = a[i] / d;
    r[i] = a[i] % d;
  }
}

/* logical right shift of values with the top bit set; left shifts drop bits */
unsigned unsigned_shifts(int n, const unsigned *restrict a) {
  unsigned acc = 0u;
  for (int i = 0; i < n; i++) {
    int s = i % 32;
    unsigned rot = s == 0 ? a[i] : (a[i] << s) | (a[i] >> (32 - s));
    acc ^= rot;
    acc += a[i] >> 31;
  }
  return acc;
}

double unsigned_to_double(int n, const unsigned *restrict a) {
  double s = 0.0;
  for (int i = 0; i < n; i++)
    s += (double)a[i] / 4294967296.0;
  return s;
}

void uchar_wrap(int n, unsigned char *restrict c) {
  for (int i = 0; i < n; i++) {
    unsigned char v = c[i];
    v += 200;
    v *= 3;
    c[i] = v - (unsigned char)i;
  }
}

unsigned long ulong_mix(int n, const unsigned *restrict a) {
  unsigned long h = 1469598103934665603UL;
  for (int i = 0; i < n; i++) {
    h ^= (unsigned long)a[i];
    h *= 1099511628211UL;
    h ^= h >> 29;
  }
  return h;
}

int main(void) {
  int n = 200;
  unsigned char *bytes = malloc(n);
  unsigned *a = malloc(sizeof(unsigned) * n);
  unsigned *b = malloc(sizeof(unsigned) * n);
  unsigned *d = malloc(sizeof(unsigned) * n);
  unsigned *q = malloc(sizeof(unsigned) * n);
  for (int i = 0; i < n; i++)
    bytes[i] = (unsigned char)((i * 131 + 7) % 256);

  printf("fnv1a=%u\n", fnv1a_bytes(n, bytes));
  lcg_fill(n, 12345u, a);
  lcg_fill(n, 4000000000u, b);
  printf("lcg a[0]=%u a[199]=%u b[0]=%u\n", a[0], a[n - 1], b[0]);
  printf("wrap_sub big=%d", wrap_sub(n, a, b, d));
  printf(" d[0]=%u d[1]=%u d[2]=%u\n", d[0], d[1], d[2]);
  unsigned_div_mod(n, a, q, d);
  unsigned long qs = 0;
  for (int i = 0; i < n; i++)
    qs += (unsigned long)q[i] * 3u + d[i];
  printf("div/mod checksum=%lu q[5]=%u r[5]=%u\n", qs, q[5], d[5]);
  printf("unsigned_shifts=%u\n", unsigned_shifts(n, a));
  printf("unsigned_to_double=%.15g\n", unsigned_to_double(n, a));
  uchar_wrap(n, bytes);
  unsigned bs = 0;
  for (int i = 0; i < n; i++)
    bs = bs * 31u + bytes[i];
  printf("uchar_wrap checksum=%u bytes[0]=%u bytes[199]=%u\n", bs, (unsigned)bytes[0],
         (unsigned)bytes[n - 1]);
  printf("ulong_mix=%lu\n", ulong_mix(n, a));

  free(bytes);
  free(a);
  free(b);
  free(d);
  free(q);
  return 0;
}
