// polyflow: compiled=count_leading_positive,collatz_steps,gcd,gcd_table,newton_sqrt,first_sum_exceeding,bisect_cubic
/* while loops whose trip count depends on data read or computed inside the loop. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int count_leading_positive(int n, const int *restrict a) {
  int i = 0;
  while (i < n && a[i] > 0)
    i++;
  return i;
}

int collatz_steps(int x) {
  int steps = 0;
  while (x != 1) {
    if (x % 2 == 0)
      x = x / 2;
    else
      x = 3 * x + 1;
    steps++;
  }
  return steps;
}

int gcd(int a, int b) {
  while (b != 0) {
    int t = a % b;
    a = b;
    b = t;
  }
  return a;
}

void gcd_table(int n, int g[n][n]) {
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++)
      g[i][j] = gcd(i + 1, j + 1);
}

void newton_sqrt(int n, const double *restrict v, double *restrict root, int *restrict iters) {
  for (int i = 0; i < n; i++) {
    double g = v[i] > 1.0 ? v[i] : 1.0;
    double prev = 0.0;
    int it = 0;
    while (fabs(g - prev) > 1e-13 * g && it < 60) {
      prev = g;
      g = 0.5 * (g + v[i] / g);
      it++;
    }
    root[i] = g;
    iters[i] = it;
  }
}

/* index of the first element at which the running sum exceeds limit, n if none */
int first_sum_exceeding(int n, const double *restrict a, double limit) {
  double s = 0.0;
  int i = 0;
  while (i < n) {
    s += a[i];
    if (s > limit)
      break;
    i++;
  }
  return i;
}

/* the real cube root of c on [lo, hi] by bisection */
double bisect_cubic(double c, double lo, double hi) {
  while (hi - lo > 1e-12) {
    double mid = 0.5 * (lo + hi);
    if (mid * mid * mid < c)
      lo = mid;
    else
      hi = mid;
  }
  return 0.5 * (lo + hi);
}

int main(void) {
  int n = 200;
  int *a = malloc(sizeof(int) * n);
  double *v = malloc(sizeof(double) * n);
  double *root = malloc(sizeof(double) * n);
  int *iters = malloc(sizeof(int) * n);
  int gn = 24;
  int (*g)[gn] = malloc(sizeof(int) * gn * gn);

  for (int i = 0; i < n; i++)
    a[i] = (i * 37 + 11) % 101 + 1;
  printf("leading positive (all): %d\n", count_leading_positive(n, a));
  a[150] = 0;
  printf("leading positive (zero at 150): %d\n", count_leading_positive(n, a));
  a[0] = -3;
  printf("leading positive (negative first): %d\n", count_leading_positive(n, a));
  printf("leading positive (empty): %d\n", count_leading_positive(0, a));

  long total_steps = 0;
  int max_steps = 0, argmax = 0;
  for (int x = 1; x <= 300; x++) {
    int s = collatz_steps(x);
    total_steps += s;
    if (s > max_steps) {
      max_steps = s;
      argmax = x;
    }
  }
  printf("collatz: total=%ld max=%d at %d\n", total_steps, max_steps, argmax);

  gcd_table(gn, g);
  long gsum = 0;
  for (int i = 0; i < gn; i++)
    for (int j = 0; j < gn; j++)
      gsum += g[i][j] * (i + 2 * j + 1);
  printf("gcd table: weighted=%ld g[11][17]=%d g[23][15]=%d\n", gsum, g[11][17], g[23][15]);

  for (int i = 0; i < n; i++)
    v[i] = 0.25 + (double)((i * 13) % 97) * 1.5;
  newton_sqrt(n, v, root, iters);
  double rsum = 0.0;
  long itsum = 0;
  for (int i = 0; i < n; i++) {
    rsum += root[i];
    itsum += iters[i];
  }
  printf("newton: sum=%.15g iters=%ld r[0]=%.15g r[7]=%.15g r[199]=%.15g\n", rsum, itsum, root[0],
         root[7], root[199]);

  for (int i = 0; i < n; i++)
    v[i] = (double)((i * 7) % 5) * 0.125;
  printf("first exceeding 10: %d\n", first_sum_exceeding(n, v, 10.0));
  printf("first exceeding 1e9: %d\n", first_sum_exceeding(n, v, 1e9));

  for (int k = 1; k <= 5; k++) {
    double c = 3.0 * k + 0.5;
    printf("cbrt(%.15g) ~ %.15g\n", c, bisect_cubic(c, 0.0, 4.0));
  }

  free(a);
  free(v);
  free(root);
  free(iters);
  free(g);
  return 0;
}
