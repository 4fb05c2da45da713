// polyflow: compiled=char_sum_promotes,short_products,signed_char_values,letter_counts,uchar_saturate,short_diff_abs,caesar_shift
/* char and short promote to int in arithmetic; stores back narrow the value. */
#include <stdio.h>
#include <stdlib.h>

/* 100 + 100 is 200 in int, not an overflow of char */
int char_sum_promotes(int n, const char *restrict a, const char *restrict b) {
  int over = 0;
  for (int i = 0; i < n; i++)
    if (a[i] + b[i] > 127)
      over += a[i] + b[i];
  return over;
}

/* short * short is computed in int: 300 * 300 = 90000 */
long short_products(int n, const short *restrict a, const short *restrict b) {
  long s = 0;
  for (int i = 0; i < n; i++) {
    int p = a[i] * b[i];
    s += p;
  }
  return s;
}

/* signed char holds negative values; comparisons and division on them */
void signed_char_values(int n, const signed char *restrict c, int *restrict out) {
  for (int i = 0; i < n; i++)
    out[i] = c[i] / 3 + (c[i] < 0 ? 1000 : 0) + c[i] % 4;
}

/* char used to index: counts of 'a'..'z' */
void letter_counts(int n, const char *restrict s, int *restrict counts) {
  for (int k = 0; k < 26; k++)
    counts[k] = 0;
  for (int i = 0; i < n; i++)
    if (s[i] >= 'a' && s[i] <= 'z')
      counts[s[i] - 'a']++;
}

void uchar_saturate(int n, const unsigned char *restrict a, const unsigned char *restrict b,
                    unsigned char *restrict out) {
  for (int i = 0; i < n; i++) {
    int v = a[i] + b[i];
    out[i] = (unsigned char)(v > 255 ? 255 : v);
  }
}

void short_diff_abs(int n, const short *restrict a, const short *restrict b,
                    unsigned short *restrict out) {
  for (int i = 0; i < n; i++) {
    int d = a[i] - b[i];
    out[i] = (unsigned short)(d < 0 ? -d : d);
  }
}

void caesar_shift(int n, char *restrict s, int k) {
  for (int i = 0; i < n; i++)
    if (s[i] >= 'a' && s[i] <= 'z')
      s[i] = (char)('a' + (s[i] - 'a' + k) % 26);
}

int main(void) {
  int n = 100;
  char *a = malloc(n);
  char *b = malloc(n);
  signed char *sc = malloc(n);
  short *sa = malloc(sizeof(short) * n);
  short *sb = malloc(sizeof(short) * n);
  unsigned short *us = malloc(sizeof(unsigned short) * n);
  unsigned char *ua = malloc(n);
  unsigned char *ub = malloc(n);
  unsigned char *uo = malloc(n);
  int *out = malloc(sizeof(int) * n);
  char *text = malloc(n + 1);
  for (int i = 0; i < n; i++) {
    a[i] = (char)((i * 7) % 120);
    b[i] = (char)((i * 13) % 110);
    sc[i] = (signed char)((i * 37) % 256 - 128);
    sa[i] = (short)((i * 211) % 601 - 300);
    sb[i] = (short)((i * 97) % 599 - 299);
    ua[i] = (unsigned char)((i * 53) % 256);
    ub[i] = (unsigned char)((i * 91) % 256);
    text[i] = (char)(i % 3 == 0 ? ' ' : 'a' + (i * 11) % 26);
  }
  text[n] = 0;

  printf("char_sum_promotes=%d\n", char_sum_promotes(n, a, b));
  printf("short_products=%ld\n", short_products(n, sa, sb));
  signed_char_values(n, sc, out);
  long s = 0;
  for (int i = 0; i < n; i++)
    s += (long)out[i] * (i + 1);
  printf("signed_char_values weighted=%ld out[0]=%d out[1]=%d\n", s, out[0], out[1]);
  letter_counts(n, text, out);
  for (int k = 0; k < 26; k++)
    printf("%d", out[k]);
  printf("\n");
  uchar_saturate(n, ua, ub, uo);
  unsigned h = 0;
  for (int i = 0; i < n; i++)
    h = h * 33u + uo[i];
  printf("uchar_saturate hash=%u uo[3]=%u\n", h, (unsigned)uo[3]);
  short_diff_abs(n, sa, sb, us);
  h = 0;
  for (int i = 0; i < n; i++)
    h = h * 33u + us[i];
  printf("short_diff_abs hash=%u us[7]=%u\n", h, (unsigned)us[7]);
  caesar_shift(n, text, 3);
  printf("%s\n", text);

  free(a);
  free(b);
  free(sc);
  free(sa);
  free(sb);
  free(us);
  free(ua);
  free(ub);
  free(uo);
  free(out);
  free(text);
  return 0;
}
