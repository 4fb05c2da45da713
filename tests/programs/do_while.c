// polyflow: compiled=digits_sum,runs_at_least_once,fixed_point_cos_free,nested_do,do_while_stride,int_sqrt,macro_wrappers
/* do { } while loops: bodies that run once with a false condition, data-dependent exits, nesting. */
#include <stdio.h>
#include <stdlib.h>

int digits_sum(int x) {
  int s = 0;
  do {
    s += x % 10;
    x /= 10;
  } while (x > 0);
  return s;
}

/* the body runs once even though the condition is false from the start */
int runs_at_least_once(int n, int *restrict a) {
  int i = n;
  int runs = 0;
  do {
    a[0] += 1;
    runs++;
    i++;
  } while (i < n);
  return runs * 100 + a[0];
}

/* iterate x <- 1 / (1 + x) to its fixed point (the golden ratio minus one) */
double fixed_point_cos_free(double x, int *restrict iters) {
  double prev;
  int it = 0;
  do {
    prev = x;
    x = 1.0 / (1.0 + x);
    it++;
  } while ((x - prev > 1e-14 || prev - x > 1e-14) && it < 200);
  iters[0] = it;
  return x;
}

void nested_do(int n, int m, int A[n][m]) {
  int i = 0;
  do {
    int j = 0;
    do {
      A[i][j] = i * m + j + (i > j ? 1 : 0);
      j++;
    } while (j < m);
    i++;
  } while (i < n);
}

long do_while_stride(int n, const long *restrict a, int stride) {
  long s = 0;
  int i = n - 1;
  do {
    s = s * 3 % 1000003 + a[i];
    i -= stride;
  } while (i >= 0);
  return s;
}

int int_sqrt(int v) {
  int r = 0;
  do {
    r++;
  } while (r * r <= v);
  return r - 1;
}

/* the macro idiom `do { ... } while (0)`: once, with an early return inside; with a break of
   its own it is still a loop (the break leaves it) */
#define CHECK(cond, code) do { if (cond) { return code; } } while (0)
int macro_wrappers(int n, int *a) {
  CHECK(n < 0, -1);
  int s = 0;
  for (int i = 0; i < n; i++) {
    do {
      if (a[i] % 3 == 0)
        break;
      s += a[i];
    } while (0);
    do s += 1; while (0);
    CHECK(s > 1000000, -2);
  }
  return s;
}

int main(void) {
  int n = 11, m = 6;
  int *one = malloc(sizeof(int));
  int (*A)[m] = malloc(sizeof(int) * n * m);
  long *la = malloc(sizeof(long) * 100);
  int *iters = malloc(sizeof(int));
  one[0] = 41;
  for (int i = 0; i < 100; i++)
    la[i] = (long)((i * 37) % 101) * 1000L;

  for (int x = 0; x < 100000; x = x * 7 + 3)
    printf("digits_sum(%d)=%d\n", x, digits_sum(x));
  printf("runs_at_least_once=%d\n", runs_at_least_once(5, one));
  printf("runs_at_least_once=%d\n", runs_at_least_once(0, one));
  double fp = fixed_point_cos_free(1.0, iters);
  printf("fixed point=%.15g after %d iterations\n", fp, iters[0]);
  nested_do(n, m, A);
  long s = 0;
  for (int i = 0; i < n; i++)
    for (int j = 0; j < m; j++)
      s += A[i][j] * (j + 2);
  printf("nested_do weighted=%ld A[10][5]=%d A[3][1]=%d\n", s, A[n - 1][m - 1], A[3][1]);
  for (int st = 1; st <= 7; st += 3)
    printf("do_while_stride(%d)=%ld\n", st, do_while_stride(100, la, st));
  printf("do_while_stride(1 elem)=%ld\n", do_while_stride(1, la, 4));
  for (int v = 0; v < 50; v += 7)
    printf("int_sqrt(%d)=%d\n", v, int_sqrt(v));
  printf("int_sqrt(1000000)=%d\n", int_sqrt(1000000));

  free(one);
  free(A);
  free(la);
  free(iters);
  int wrapped[7] = {1, 3, 4, 6, 7, 900001, 200000};
  printf("macro_wrappers %d %d %d\n", macro_wrappers(5, wrapped), macro_wrappers(-1, wrapped),
         macro_wrappers(7, wrapped));
  return 0;
}
