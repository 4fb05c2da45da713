// polyflow: compiled=mark,guarded_count,or_side_effects,and_side_effects,safe_ratio_count,logical_values,find_nth,reciprocal_filter
/* && || ! with short-circuit evaluation: guards against out-of-bounds reads and division by
   zero, and calls with side effects that must run only when reached. */
#include <stdio.h>
#include <stdlib.h>

int mark(int *restrict touched, int i, int result) {
  touched[i] += 1;
  return result;
}

/* the loop runs past n; a[i] must never be read for i >= n */
int guarded_count(int n, int extra, const int *restrict a) {
  int c = 0;
  for (int i = 0; i < n + extra; i++)
    if (i < n && a[i] > 0)
      c++;
  return c;
}

void or_side_effects(int n, const int *restrict a, int *restrict touched, int *restrict res) {
  for (int i = 0; i < n; i++)
    res[i] = a[i] > 5 || mark(touched, i, a[i] % 2);
}

void and_side_effects(int n, const int *restrict a, int *restrict touched, int *restrict res) {
  for (int i = 0; i < n; i++)
    res[i] = (a[i] > 2 && mark(touched, i, a[i] < 9)) ? 10 : 20;
}

int safe_ratio_count(int n, const int *restrict a, const int *restrict d) {
  int c = 0;
  for (int i = 0; i < n; i++)
    if (d[i] != 0 && a[i] / d[i] > 2)
      c++;
  return c;
}

void logical_values(int n, const int *restrict a, const int *restrict b, int *restrict v) {
  for (int i = 0; i < n; i++)
    v[i] = !a[i] + 2 * (a[i] && b[i]) + 4 * (a[i] || !b[i]) + 8 * !(a[i] > b[i]);
}

/* index of the (k+1)-th occurrence of key, or -1; the decrement runs only on matches */
int find_nth(int n, const int *restrict a, int key, int k) {
  int i = 0;
  while (i < n && (a[i] != key || k-- > 0))
    i++;
  return i < n ? i : -1;
}

int reciprocal_filter(int n, const double *restrict x, double *restrict out) {
  int kept = 0;
  for (int i = 0; i < n; i++) {
    if (x[i] != 0.0 && 1.0 / x[i] > 0.5 && !(x[i] > 1.5)) {
      out[i] = 1.0 / x[i];
      kept++;
    } else {
      out[i] = 0.0;
    }
  }
  return kept;
}

int main(void) {
  int n = 40;
  int *a = malloc(sizeof(int) * n);
  int *b = malloc(sizeof(int) * n);
  int *d = malloc(sizeof(int) * n);
  int *touched = malloc(sizeof(int) * n);
  int *res = malloc(sizeof(int) * n);
  double *x = malloc(sizeof(double) * n);
  double *out = malloc(sizeof(double) * n);
  for (int i = 0; i < n; i++) {
    a[i] = (i * 7) % 12 - 1;
    b[i] = (i * 5) % 3 - 1;
    d[i] = (i % 4) - 1;
    touched[i] = 0;
    x[i] = (double)(i % 8) * 0.25;
  }

  printf("guarded_count=%d\n", guarded_count(n, 7, a));
  or_side_effects(n, a, touched, res);
  for (int i = 0; i < n; i++)
    printf("%d%d ", res[i], touched[i]);
  printf("\n");
  and_side_effects(n, a, touched, res);
  for (int i = 0; i < n; i++)
    printf("%d:%d ", res[i], touched[i]);
  printf("\n");
  printf("safe_ratio_count=%d\n", safe_ratio_count(n, a, d));
  logical_values(n, a, b, res);
  for (int i = 0; i < n; i++)
    printf("%d ", res[i]);
  printf("\n");
  for (int k = 0; k < 5; k++)
    printf("find_nth(key=6, k=%d)=%d\n", k, find_nth(n, a, 6, k));
  printf("find_nth(key=99)=%d\n", find_nth(n, a, 99, 0));
  int kept = reciprocal_filter(n, x, out);
  double s = 0.0;
  for (int i = 0; i < n; i++)
    s += out[i];
  printf("reciprocal kept=%d sum=%.15g\n", kept, s);

  free(a);
  free(b);
  free(d);
  free(touched);
  free(res);
  free(x);
  free(out);
  return 0;
}
