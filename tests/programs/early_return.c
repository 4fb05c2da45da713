// polyflow: compiled=linear_search,find_in_matrix,is_sorted,normalize_rows,first_root_sign_change,classify_triangle,checked_mean
/* return from inside loops (nested too), several returns per function, void early returns. */
#include <stdio.h>
#include <stdlib.h>

int linear_search(int n, const int *restrict a, int key) {
  for (int i = 0; i < n; i++)
    if (a[i] == key)
      return i;
  return -1;
}

/* returns i * m + j of the first match, or -1 */
int find_in_matrix(int n, int m, int A[n][m], int key) {
  for (int i = 0; i < n; i++)
    for (int j = 0; j < m; j++)
      if (A[i][j] == key)
        return i * m + j;
  return -1;
}

int is_sorted(int n, const double *restrict a) {
  if (n < 2)
    return 1;
  int i = 1;
  while (i < n) {
    if (a[i - 1] > a[i])
      return 0;
    i++;
  }
  return 1;
}

void normalize_rows(int n, int m, double A[n][m]) {
  if (n <= 0 || m <= 0)
    return;
  for (int i = 0; i < n; i++) {
    double s = 0.0;
    for (int j = 0; j < m; j++)
      s += A[i][j];
    if (s == 0.0)
      continue;
    for (int j = 0; j < m; j++)
      A[i][j] /= s;
  }
}

/* first i with a sign change between p(x_i) and p(x_{i+1}) for p(x) = x^3 - 2x - 5 */
double first_root_sign_change(double lo, double step, int steps) {
  double prev = lo * lo * lo - 2.0 * lo - 5.0;
  for (int i = 1; i <= steps; i++) {
    double x = lo + step * i;
    double v = x * x * x - 2.0 * x - 5.0;
    if ((prev < 0.0 && v >= 0.0) || (prev > 0.0 && v <= 0.0))
      return x - 0.5 * step;
    prev = v;
  }
  return -1000.0;
}

int classify_triangle(int a, int b, int c) {
  if (a <= 0 || b <= 0 || c <= 0)
    return 0;
  if (a + b <= c || a + c <= b || b + c <= a)
    return 1;
  if (a == b && b == c)
    return 3;
  if (a == b || b == c || a == c)
    return 2;
  if (a * a + b * b == c * c || a * a + c * c == b * b || b * b + c * c == a * a)
    return 5;
  return 4;
}

/* -1.0 when any value is negative, else the mean */
double checked_mean(int n, const double *restrict a) {
  double s = 0.0;
  int i = 0;
  do {
    if (a[i] < 0.0)
      return -1.0;
    s += a[i];
    i++;
  } while (i < n);
  return s / n;
}

int main(void) {
  int n = 50, m = 7;
  int *a = malloc(sizeof(int) * n);
  int (*A)[m] = malloc(sizeof(int) * n * m);
  double *d = malloc(sizeof(double) * n);
  double (*D)[m] = malloc(sizeof(double) * 5 * m);
  for (int i = 0; i < n; i++) {
    a[i] = (i * 31) % 53;
    d[i] = (double)i * 0.5;
    for (int j = 0; j < m; j++)
      A[i][j] = (i * m + j) * 3 % 101;
  }
  for (int i = 0; i < 5; i++)
    for (int j = 0; j < m; j++)
      D[i][j] = i == 2 ? 0.0 : (double)(i + j + 1);

  for (int key = 0; key < 60; key += 7)
    printf("linear_search(%d)=%d\n", key, linear_search(n, a, key));
  for (int key = 0; key < 101; key += 25)
    printf("find_in_matrix(%d)=%d\n", key, find_in_matrix(n, m, A, key));
  printf("is_sorted: %d", is_sorted(n, d));
  d[30] = -1.0;
  printf(" %d %d %d\n", is_sorted(n, d), is_sorted(1, d), is_sorted(30, d));
  normalize_rows(5, m, D);
  normalize_rows(0, m, D);
  for (int i = 0; i < 5; i++) {
    for (int j = 0; j < m; j++)
      printf(" %.15g", D[i][j]);
    printf("\n");
  }
  printf("root bracket=%.15g none=%.15g\n", first_root_sign_change(0.0, 0.01, 500),
         first_root_sign_change(3.0, 0.5, 10));
  int tri[8][3] = {{3, 4, 5}, {2, 2, 2}, {2, 2, 3}, {1, 2, 3}, {0, 1, 1}, {4, 6, 7}, {13, 5, 12}, {7, 3, 3}};
  for (int t = 0; t < 8; t++)
    printf("classify(%d,%d,%d)=%d\n", tri[t][0], tri[t][1], tri[t][2],
           classify_triangle(tri[t][0], tri[t][1], tri[t][2]));
  printf("checked_mean=%.15g %.15g\n", checked_mean(30, d), checked_mean(n, d));

  free(a);
  free(A);
  free(d);
  free(D);
  return 0;
}
