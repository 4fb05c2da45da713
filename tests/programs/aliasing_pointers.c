// polyflow: compiled=shift_right_by_one,add_into,prefix_in_place,axpy_plain,matrix_self_update
/* Pointer parameters without restrict that overlap at run time: results depend on the exact
   order of loads and stores, which must be kept. */
#include <stdio.h>
#include <stdlib.h>

/* dst[i] = src[i] + 1 with dst == src + 1: a chain of dependences through memory */
void shift_right_by_one(int n, double *dst, const double *src) {
  for (int i = 0; i < n; i++)
    dst[i] = src[i] + 1.0;
}

void add_into(int n, int *a, const int *b) {
  for (int i = 0; i < n; i++)
    a[i] += b[i];
}

void prefix_in_place(int n, long *out, const long *in) {
  for (int i = 1; i < n; i++)
    out[i] = out[i - 1] + in[i];
}

void axpy_plain(int n, double alpha, const double *x, double *y) {
  for (int i = 0; i < n; i++)
    y[i] = y[i] + alpha * x[i];
}

/* A and B may be the same matrix */
void matrix_self_update(int n, double A[n][n], double B[n][n]) {
  for (int i = 1; i < n; i++)
    for (int j = 1; j < n; j++)
      A[i][j] = 0.5 * B[i - 1][j] + 0.5 * B[i][j - 1];
}

int main(void) {
  int n = 40;
  double *v = malloc(sizeof(double) * (n + 4));
  int *a = malloc(sizeof(int) * n);
  long *l = malloc(sizeof(long) * n);
  double (*M)[12] = malloc(sizeof(double) * 12 * 12);
  for (int i = 0; i < n + 4; i++)
    v[i] = (double)(i % 5);
  for (int i = 0; i < n; i++) {
    a[i] = i * 3 - 7;
    l[i] = (long)i * 5 + 1;
  }

  shift_right_by_one(n, v + 1, v);
  printf("shift:");
  for (int i = 0; i < n + 4; i += 3)
    printf(" %.15g", v[i]);
  printf("\n");
  shift_right_by_one(n, v, v + 2);
  printf("shift back:");
  for (int i = 0; i < n + 4; i += 3)
    printf(" %.15g", v[i]);
  printf("\n");
  add_into(n, a, a);
  add_into(n - 1, a + 1, a);
  printf("add_into:");
  for (int i = 0; i < n; i += 4)
    printf(" %d", a[i]);
  printf("\n");
  prefix_in_place(n, l, l);
  printf("prefix_in_place: %ld %ld %ld\n", l[1], l[10], l[n - 1]);
  axpy_plain(n - 2, 0.5, v, v + 2);
  double s = 0.0;
  for (int i = 0; i < n + 4; i++)
    s += v[i] * (double)(i + 1);
  printf("axpy overlapping weighted=%.15g\n", s);
  for (int i = 0; i < 12; i++)
    for (int j = 0; j < 12; j++)
      M[i][j] = (double)((i + 2 * j) % 7);
  matrix_self_update(12, M, M);
  s = 0.0;
  for (int i = 0; i < 12; i++)
    for (int j = 0; j < 12; j++)
      s += M[i][j] * (double)(i * 12 + j + 1);
  printf("matrix_self_update weighted=%.15g M[11][11]=%.15g\n", s, M[11][11]);

  free(v);
  free(a);
  free(l);
  free(M);
  return 0;
}
