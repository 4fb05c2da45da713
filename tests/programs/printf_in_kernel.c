// polyflow: compiled=row_norms1,normalize_rows1
// polyflow: fallback=dump_row,traced_update
/* Functions that print (a libc call: left to the C compiler) next to compiled kernels, and a
   printing function that calls a compiled one. */
#include <stdio.h>
#include <stdlib.h>

void row_norms1(int n, int m, double A[n][m], double *restrict norms) {
  for (int i = 0; i < n; i++) {
    double s = 0.0;
    for (int j = 0; j < m; j++)
      s += A[i][j] < 0.0 ? -A[i][j] : A[i][j];
    norms[i] = s;
  }
}

void normalize_rows1(int n, int m, double A[n][m], double *restrict norms) {
  row_norms1(n, m, A, norms);
  for (int i = 0; i < n; i++)
    for (int j = 0; j < m; j++)
      A[i][j] = norms[i] > 0.0 ? A[i][j] / norms[i] : 0.0;
}

void dump_row(int m, const double *restrict row) {
  for (int j = 0; j < m; j++)
    printf(" %.15g", row[j]);
  printf("\n");
}

/* prints while it works */
void traced_update(int n, int m, double A[n][m], double *restrict norms) {
  normalize_rows1(n, m, A, norms);
  for (int i = 0; i < n; i++) {
    printf("row %d norm %.15g:", i, norms[i]);
    dump_row(m, A[i]);
  }
}

int main(void) {
  int n = 6, m = 5;
  double (*A)[m] = malloc(sizeof(double) * n * m);
  double *norms = malloc(sizeof(double) * n);
  for (int i = 0; i < n; i++)
    for (int j = 0; j < m; j++)
      A[i][j] = i == 3 ? 0.0 : (double)((i * 3 + j * 2) % 7) - 3.0;
  traced_update(n, m, A, norms);
  row_norms1(n, m, A, norms);
  dump_row(n, norms);
  free(A);
  free(norms);
  return 0;
}
