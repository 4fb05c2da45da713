// polyflow: compiled=float_induction,near_int_max,near_int_min,unsigned_wrapping_down,uchar_wrapping_up,condition_with_side_effect,post_increment_index_while,long_bound_int_index,zero_trip_nested
/* Loops at the edges of their types: float induction variables, bounds next to INT_MAX and
   INT_MIN, unsigned counters that wrap around to leave the loop, conditions with side effects. */
#include <stdio.h>
#include <stdlib.h>

/* 0.1 added ten times is below 1.0: eleven iterations */
int float_induction(double step, double limit, double *restrict out) {
  int k = 0;
  for (double x = 0.0; x < limit; x += step)
    out[k++] = x * 2.0;
  return k;
}

/* the index reaches INT_MAX exactly; the loop must not wrap */
long near_int_max(int count) {
  long s = 0;
  for (int i = 2147483647 - count; i < 2147483647; i++)
    s += i % 1000;
  for (int i = 2147483647 - count; i < 2147483646; i += 2)
    s += 1;
  return s;
}

long near_int_min(int count) {
  long s = 0;
  for (int i = -2147483647 + count; i > -2147483647 - 1; i--)
    s += -(i % 1000);
  return s;
}

/* u -= 3 from 10: 10 7 4 1, then 4294967294 >= 20 ends the loop */
int unsigned_wrapping_down(unsigned start, int *restrict out) {
  int k = 0;
  for (unsigned u = start; u < 20u; u -= 3u)
    out[k++] = (int)u;
  return k;
}

/* an unsigned char counter passes 255 -> 0 before reaching the exit value */
int uchar_wrapping_up(unsigned char start, unsigned char stop, int *restrict out) {
  int k = 0;
  for (unsigned char c = start; c != stop; c++)
    out[k++] = c;
  return k;
}

int condition_with_side_effect(int n, const int *restrict a) {
  int s = 0;
  unsigned u = (unsigned)n;
  while (u-- > 0)
    s += a[u] * (int)(u % 3);
  int k = n;
  do
    s += k;
  while (--k > n / 2);
  return s * 10 + (int)(u == 4294967295u);
}

int post_increment_index_while(int n, int *restrict a) {
  int i = 0;
  while (i < n) {
    int k = i;
    a[i++] = k * k;
  }
  return i;
}

long long_bound_int_index(long n, const int *restrict a) {
  long s = 0;
  for (int i = 0; i < n; i++)
    s += a[i];
  for (long j = n - 1; j >= 0; j -= 7)
    s += (long)a[j] * j;
  return s;
}

int zero_trip_nested(int n, int m, int *restrict out) {
  int c = 0;
  for (int i = 0; i < n; i++)
    for (int j = i; j < m; j++)
      for (int k = j; k < i; k++)
        c += 1000;
  for (int i = 0; i < n; i++)
    for (int j = m; j < i; j++)
      c++;
  out[0] = c;
  return c;
}

int main(void) {
  double *out = malloc(sizeof(double) * 32);
  int *io = malloc(sizeof(int) * 300);
  int *a = malloc(sizeof(int) * 50);
  for (int i = 0; i < 50; i++)
    a[i] = (i * 7) % 13 - 6;

  int k = float_induction(0.1, 1.0, out);
  printf("float_induction: %d iterations, last %.15g\n", k, out[k - 1]);
  k = float_induction(0.25, 1.0, out);
  printf("float_induction: %d iterations, last %.15g\n", k, out[k - 1]);
  printf("near_int_max=%ld near_int_min=%ld\n", near_int_max(25), near_int_min(25));
  k = unsigned_wrapping_down(10u, io);
  printf("unsigned_wrapping_down: %d:", k);
  for (int i = 0; i < k; i++)
    printf(" %d", io[i]);
  printf("\n");
  k = unsigned_wrapping_down(25u, io);
  printf("unsigned_wrapping_down (no trip): %d\n", k);
  k = uchar_wrapping_up(250, 4, io);
  printf("uchar_wrapping_up: %d:", k);
  for (int i = 0; i < k; i++)
    printf(" %d", io[i]);
  printf("\n");
  printf("condition_with_side_effect=%d\n", condition_with_side_effect(50, a));
  printf("post_increment_index_while=%d", post_increment_index_while(20, io));
  printf(" io[7]=%d io[19]=%d\n", io[7], io[19]);
  printf("long_bound_int_index=%ld\n", long_bound_int_index(50L, a));
  printf("zero_trip_nested=%d\n", zero_trip_nested(6, 3, io));

  free(out);
  free(io);
  free(a);
  return 0;
}
