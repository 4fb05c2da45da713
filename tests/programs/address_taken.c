// polyflow: compiled=minmax,swap_ints,sum_and_count
// polyflow: fallback=range_via_address,sort_small,mean_positive
/* Functions that take addresses (&x, &a[i]) are left to the C compiler; the functions they call
   through pointer parameters (written as *p and p[0]) are compiled. */
#include <stdio.h>
#include <stdlib.h>

void minmax(int n, const int *restrict a, int *restrict lo, int *restrict hi) {
  int mn = a[0], mx = a[0];
  for (int i = 1; i < n; i++) {
    mn = a[i] < mn ? a[i] : mn;
    mx = a[i] > mx ? a[i] : mx;
  }
  *lo = mn;
  *hi = mx;
}

void swap_ints(int *x, int *y) {
  int t = *x;
  *x = *y;
  *y = t;
}

void sum_and_count(int n, const double *restrict a, double *restrict sum, int *restrict count) {
  sum[0] = 0.0;
  count[0] = 0;
  for (int i = 0; i < n; i++)
    if (a[i] > 0.0) {
      sum[0] += a[i];
      count[0] += 1;
    }
}

int range_via_address(int n, const int *restrict a) {
  int lo, hi;
  minmax(n, a, &lo, &hi);
  return hi - lo;
}

/* insertion sort through swap_ints(&a[j], &a[j - 1]) */
void sort_small(int n, int *a) {
  for (int i = 1; i < n; i++)
    for (int j = i; j > 0 && a[j - 1] > a[j]; j--)
      swap_ints(&a[j], &a[j - 1]);
}

double mean_positive(int n, const double *restrict a) {
  double s;
  int c;
  sum_and_count(n, a, &s, &c);
  return c > 0 ? s / c : 0.0;
}

int main(void) {
  int n = 40;
  int *a = malloc(sizeof(int) * n);
  double *d = malloc(sizeof(double) * n);
  for (int i = 0; i < n; i++) {
    a[i] = (i * 53) % 97 - 40;
    d[i] = (double)((i * 7) % 11) - 4.5;
  }
  printf("range=%d\n", range_via_address(n, a));
  sort_small(n, a);
  for (int i = 0; i < n; i++)
    printf("%d ", a[i]);
  printf("\n");
  printf("mean_positive=%.15g\n", mean_positive(n, d));
  int *lohi = malloc(sizeof(int) * 2);
  minmax(n, a, lohi, lohi + 1);
  printf("minmax=%d %d\n", lohi[0], lohi[1]);
  swap_ints(lohi, lohi + 1);
  printf("swapped=%d %d\n", lohi[0], lohi[1]);
  free(a);
  free(d);
  free(lohi);
  return 0;
}
