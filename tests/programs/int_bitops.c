// polyflow: compiled=popcount,parity_table,bit_reverse8,mask_mix,signed_div_mod,long_bits,gray_codes
/* Integer / % << >> & | ^ ~ on non-negative and negative operands (no shifts of negatives). */
#include <stdio.h>
#include <stdlib.h>

int popcount(int x) {
  int c = 0;
  while (x != 0) {
    c += x & 1;
    x = x >> 1;
  }
  return c;
}

void parity_table(int n, int *restrict par) {
  for (int i = 0; i < n; i++)
    par[i] = popcount(i) & 1;
}

int bit_reverse8(int x) {
  int r = 0;
  for (int b = 0; b < 8; b++) {
    r = (r << 1) | (x & 1);
    x >>= 1;
  }
  return r;
}

void mask_mix(int n, const int *restrict a, int *restrict out) {
  for (int i = 0; i < n; i++) {
    int v = a[i] & 0x7fff;
    int t = ((v << 3) & 0xffff) ^ (v >> 2);
    t |= (v & 0x0f) << 12;
    out[i] = (~t & 0xffff) + (t % 7) - (v / 3);
  }
}

/* C99 truncating division: -7 / 2 == -3, -7 % 2 == -1 */
void signed_div_mod(int n, const int *restrict a, const int *restrict d, int *restrict q,
                    int *restrict r) {
  for (int i = 0; i < n; i++) {
    q[i] = a[i] / d[i];
    r[i] = a[i] % d[i];
  }
}

long long_bits(int n, const long *restrict a) {
  long acc = 0;
  for (int i = 0; i < n; i++) {
    long v = a[i] & 0xffffffffffL;
    acc ^= (v << 20) | (v >> 7);
    acc = acc & 0x3fffffffffffffffL;
  }
  return acc;
}

void gray_codes(int n, int *restrict g, int *restrict back) {
  for (int i = 0; i < n; i++) {
    g[i] = i ^ (i >> 1);
    int b = g[i];
    for (int s = 1; s < 16; s <<= 1)
      b ^= b >> s;
    back[i] = b;
  }
}

int main(void) {
  int n = 64;
  int *par = malloc(sizeof(int) * n);
  int *a = malloc(sizeof(int) * n);
  int *d = malloc(sizeof(int) * n);
  int *q = malloc(sizeof(int) * n);
  int *r = malloc(sizeof(int) * n);
  int *out = malloc(sizeof(int) * n);
  long *la = malloc(sizeof(long) * n);

  parity_table(n, par);
  for (int i = 0; i < n; i++)
    printf("%d", par[i]);
  printf("\n");
  for (int x = 0; x < 256; x += 37)
    printf("rev8(%d)=%d popcount=%d\n", x, bit_reverse8(x), popcount(x));
  printf("popcount(0x7fffffff)=%d\n", popcount(0x7fffffff));

  for (int i = 0; i < n; i++) {
    a[i] = (i * 4099 + 17) % 30011 - 15000;
    d[i] = (i % 9) - 4;
    if (d[i] == 0)
      d[i] = 5;
    la[i] = (long)i * 123456789L + 987654321L;
  }
  mask_mix(n, a, out);
  long s = 0;
  for (int i = 0; i < n; i++)
    s += (long)out[i] * (i + 1);
  printf("mask_mix weighted=%ld out[0]=%d out[63]=%d\n", s, out[0], out[n - 1]);
  signed_div_mod(n, a, d, q, r);
  for (int i = 0; i < 12; i++)
    printf("%d / %d = %d rem %d\n", a[i], d[i], q[i], r[i]);
  long qs = 0;
  for (int i = 0; i < n; i++)
    qs += q[i] * 3 + r[i];
  printf("div/mod checksum=%ld\n", qs);
  printf("long_bits=%ld\n", long_bits(n, la));
  gray_codes(n, q, r);
  int ok = 1;
  for (int i = 0; i < n; i++)
    ok = ok && r[i] == i;
  printf("gray: g[5]=%d g[63]=%d inverse_ok=%d\n", q[5], q[63], ok);

  free(par);
  free(a);
  free(d);
  free(q);
  free(r);
  free(out);
  free(la);
  return 0;
}
