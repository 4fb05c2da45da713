// polyflow: compiled=clamp_neighbors,edge_replicate_blur,sign_and_abs,nested_select,count_by_sign,pick_rows
/* Conditional expressions: in subscripts, as values, nested, with side effects in only one arm. */
#include <stdio.h>
#include <stdlib.h>

/* out[i] = a[i-1] + a[i] + a[i+1] with the neighbours clamped at the ends */
void clamp_neighbors(int n, const int *restrict a, int *restrict out) {
  for (int i = 0; i < n; i++)
    out[i] = a[i > 0 ? i - 1 : 0] + a[i] + a[i < n - 1 ? i + 1 : n - 1];
}

void edge_replicate_blur(int n, int m, double in[n][m], double out[n][m]) {
  for (int i = 0; i < n; i++)
    for (int j = 0; j < m; j++) {
      double up = in[i == 0 ? 0 : i - 1][j];
      double down = in[i + 1 < n ? i + 1 : i][j];
      double left = in[i][j > 0 ? j - 1 : j];
      double right = in[i][(j + 1 == m) ? j : j + 1];
      out[i][j] = 0.5 * in[i][j] + 0.125 * (up + down + left + right);
    }
}

void sign_and_abs(int n, const double *restrict x, int *restrict sgn, double *restrict mag) {
  for (int i = 0; i < n; i++) {
    sgn[i] = x[i] > 0.0 ? 1 : (x[i] < 0.0 ? -1 : 0);
    mag[i] = x[i] < 0.0 ? -x[i] : x[i];
  }
}

/* nested conditionals choosing between four formulas */
void nested_select(int n, const int *restrict a, int *restrict out) {
  for (int i = 0; i < n; i++)
    out[i] = a[i] % 2 == 0 ? (a[i] > 10 ? a[i] / 2 : a[i] * 3)
                           : (a[i] > 10 ? a[i] - 10 : -a[i]);
}

/* only the selected arm is evaluated: exactly one counter moves per element */
void count_by_sign(int n, const int *restrict a, int *restrict counts) {
  int pos = 0, neg = 0;
  for (int i = 0; i < n; i++) {
    int before = a[i] >= 0 ? pos++ : neg++;
    counts[2 + i] = before;
  }
  counts[0] = pos;
  counts[1] = neg;
}

/* the row index of a 2-D access chosen by a ternary on data */
void pick_rows(int n, int m, double A[n][m], const int *restrict sel, double *restrict out) {
  for (int j = 0; j < m; j++)
    out[j] = A[sel[j] < n ? sel[j] : n - 1][j] + (sel[j] >= n ? 100.0 : 0.0);
}

int main(void) {
  int n = 30, m = 7;
  int *a = malloc(sizeof(int) * n);
  int *out = malloc(sizeof(int) * n);
  int *counts = malloc(sizeof(int) * (n + 2));
  double *x = malloc(sizeof(double) * n);
  double *mag = malloc(sizeof(double) * n);
  int *sgn = malloc(sizeof(int) * n);
  double (*in)[m] = malloc(sizeof(double) * n * m);
  double (*blur)[m] = malloc(sizeof(double) * n * m);
  int *sel = malloc(sizeof(int) * m);
  double *picked = malloc(sizeof(double) * m);

  for (int i = 0; i < n; i++) {
    a[i] = (i * 17) % 23 - 6;
    x[i] = (double)((i * 5) % 7 - 3) * 0.75;
    for (int j = 0; j < m; j++)
      in[i][j] = (double)((i * 3 + j * 5) % 8);
  }
  for (int j = 0; j < m; j++)
    sel[j] = (j * 11) % 37;

  clamp_neighbors(n, a, out);
  for (int i = 0; i < n; i++)
    printf("%d ", out[i]);
  printf("\n");
  edge_replicate_blur(n, m, in, blur);
  double bsum = 0.0;
  for (int i = 0; i < n; i++)
    for (int j = 0; j < m; j++)
      bsum += blur[i][j] * (double)(i * m + j + 1);
  printf("blur weighted=%.15g corner=%.15g %.15g\n", bsum, blur[0][0], blur[n - 1][m - 1]);
  sign_and_abs(n, x, sgn, mag);
  for (int i = 0; i < 10; i++)
    printf("x=%.15g sgn=%d mag=%.15g\n", x[i], sgn[i], mag[i]);
  nested_select(n, a, out);
  for (int i = 0; i < n; i++)
    printf("%d ", out[i]);
  printf("\n");
  count_by_sign(n, a, counts);
  for (int i = 0; i < n + 2; i++)
    printf("%d ", counts[i]);
  printf("\n");
  pick_rows(n, m, in, sel, picked);
  for (int j = 0; j < m; j++)
    printf("picked[%d]=%.15g\n", j, picked[j]);

  free(a);
  free(out);
  free(counts);
  free(x);
  free(mag);
  free(sgn);
  free(in);
  free(blur);
  free(sel);
  free(picked);
  return 0;
}
