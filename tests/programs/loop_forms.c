// polyflow: compiled=le_and_ne_conditions,strided_loops,long_and_unsigned_indices,index_after_loop,data_dependent_bounds,nonaffine_accesses,empty_and_single_trip
/* Loop shapes: <=, != and > conditions, steps 2 and 4, long and unsigned induction variables,
   the index read after the loop, bounds read from memory, and non-affine subscripts and bounds
   (modulo, products of indices, indirection) that must stay correct without being raised. */
#include <stdio.h>
#include <stdlib.h>

long le_and_ne_conditions(int n, const int *restrict a) {
  long s = 0;
  for (int i = 0; i <= n - 1; i++)
    s += a[i];
  for (int i = 0; i != n; i++)
    s += 2 * a[i];
  for (int i = n - 1; i > 0; i--)
    s -= a[i - 1];
  return s;
}

void strided_loops(int n, int *restrict a) {
  for (int i = 0; i < n; i += 2)
    a[i] += 1;
  for (int i = 1; i < n; i += 4)
    a[i] *= 3;
  for (int i = 3; i <= n - 2; i += 3)
    a[i] = a[i - 1] - a[i + 1];
}

double long_and_unsigned_indices(long n, const double *restrict x, unsigned m) {
  double s = 0.0;
  for (long i = 0; i < n; i++)
    s += x[i] * (double)(i % 4);
  for (unsigned u = 0; u < m; u++)
    s -= x[u] * 0.5;
  return s;
}

/* the induction variable is live after the loop */
int index_after_loop(int n, const int *restrict a, int key) {
  int i;
  for (i = 0; i < n; i++)
    if (a[i] >= key)
      break;
  int j = 0;
  for (j = n; j > i; j -= 5)
    ;
  return i * 1000 + j;
}

/* row lengths stored in memory */
long data_dependent_bounds(int n, int m, int A[n][m], const int *restrict len) {
  long s = 0;
  for (int i = 0; i < n; i++)
    for (int j = 0; j < len[i]; j++)
      s += A[i][j] * (j + 1);
  return s;
}

void nonaffine_accesses(int n, const int *restrict a, const int *restrict idx, int *restrict out) {
  for (int i = 0; i < n; i++)
    out[i] = a[(i * 7) % n] + a[idx[i]] + a[(i * i) % n];
  for (int i = 1; i * i < n; i++)
    out[i * i] += 1000;
}

int empty_and_single_trip(int n, int *restrict a) {
  int c = 0;
  for (int i = n; i < n; i++)
    a[i] = -1;
  for (int i = 5; i < 6; i++) {
    a[i] += 100;
    c++;
  }
  for (int i = 10; i > 20; i++)
    c += 1000;
  return c;
}

int main(void) {
  int n = 64, m = 10;
  int *a = malloc(sizeof(int) * n);
  int *b = malloc(sizeof(int) * n);
  int *idx = malloc(sizeof(int) * n);
  int *len = malloc(sizeof(int) * n);
  double *x = malloc(sizeof(double) * n);
  int (*A)[m] = malloc(sizeof(int) * n * m);
  for (int i = 0; i < n; i++) {
    a[i] = (i * 13) % 29 - 9;
    idx[i] = (i * 17 + 3) % n;
    len[i] = (i * 3) % (m + 1);
    x[i] = (double)(i % 7) * 0.25;
    for (int j = 0; j < m; j++)
      A[i][j] = (i + j * j) % 9 - 4;
  }

  printf("le_and_ne_conditions=%ld\n", le_and_ne_conditions(n, a));
  for (int i = 0; i < n; i++)
    b[i] = a[i];
  strided_loops(n, b);
  for (int i = 0; i < 20; i++)
    printf("%d ", b[i]);
  printf("\n");
  printf("long_and_unsigned_indices=%.15g\n", long_and_unsigned_indices(n, x, 20u));
  for (int i = 0; i < n; i++)
    b[i] = i * 2;
  printf("index_after_loop=%d %d\n", index_after_loop(n, b, 37), index_after_loop(n, b, 1000));
  printf("data_dependent_bounds=%ld\n", data_dependent_bounds(n, m, A, len));
  nonaffine_accesses(n, a, idx, b);
  long s = 0;
  for (int i = 0; i < n; i++)
    s += (long)b[i] * (i + 1);
  printf("nonaffine weighted=%ld b[4]=%d b[49]=%d\n", s, b[4], b[49]);
  int trips = empty_and_single_trip(n, a);
  printf("empty_and_single_trip=%d a[5]=%d\n", trips, a[5]);

  free(a);
  free(b);
  free(idx);
  free(len);
  free(x);
  free(A);
  return 0;
}
