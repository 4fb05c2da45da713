// polyflow: compiled=mm,stencil5,box_sums,mirror_rows,shift_left_in_rows,padded_add,sums_past_row
/* Flat pointers addressed a[i*m + k] with symbolic row lengths (raise-delinearize makes them 2-D
   and 3-D affine accesses), cases it must leave alone, and calls whose arrays overlap. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REPORT(label, arr, count)                                   \
  do {                                                              \
    double sum_ = 0.0;                                              \
    unsigned long hash_ = 14695981039346656037UL;                   \
    for (long k_ = 0; k_ < (long)(count); k_++) {                   \
      unsigned long bits_;                                          \
      memcpy(&bits_, &(arr)[k_], sizeof bits_);                     \
      sum_ += (arr)[k_];                                            \
      hash_ = (hash_ ^ bits_) * 1099511628211UL;                    \
    }                                                               \
    printf("%s: sum=%.15g hash=%lu\n", (label), sum_, hash_);       \
  } while (0)

/* C = A B, row-major n x m times m x p */
void mm(int n, int m, int p, double *C, const double *A, const double *B) {
  for (int i = 0; i < n; i++)
    for (int j = 0; j < p; j++) {
      C[i * p + j] = 0;
      for (int k = 0; k < m; k++)
        C[i * p + j] += A[i * m + k] * B[k * p + j];
    }
}

/* five-point stencil on the interior of an n x m grid */
void stencil5(int n, int m, const double *in, double *out) {
  for (int i = 1; i < n - 1; i++)
    for (int j = 1; j < m - 1; j++)
      out[i * m + j] = 0.2 * (in[i * m + j] + in[(i - 1) * m + j] + in[(i + 1) * m + j] +
                              in[i * m + j - 1] + in[i * m + j + 1]);
}

/* out[i][j] = sum over k of a[i][j][k], a n x m x p */
void box_sums(int n, int m, int p, const double *a, double *out) {
  for (int i = 0; i < n; i++)
    for (int j = 0; j < m; j++) {
      double s = 0.0;
      for (int k = 0; k < p; k++)
        s += a[(i * m + j) * p + k];
      out[i * m + j] = s;
    }
}

/* each row reversed, the index written k + m*i */
void mirror_rows(int n, int m, const double *a, double *b) {
  for (int i = 0; i < n; i++)
    for (int k = 0; k < m; k++)
      b[k + m * i] = a[i * m + (m - 1 - k)];
}

/* a[i][k] = a[i][k+1] within each row: in place, the order of the loads and stores matters */
void shift_left_in_rows(int n, int m, double *a) {
  for (int i = 0; i < n; i++)
    for (int k = 0; k < m - 1; k++)
      a[i * m + k] = a[i * m + k + 1] * 0.5 + 1.0;
}

/* NOT delinearized: rows of length ld, of which the loop touches m (nothing says m <= ld) */
void padded_add(int n, int m, int ld, double *A, const double *x) {
  for (int i = 0; i < n; i++)
    for (int j = 0; j < m; j++)
      A[i * ld + j] += x[j];
}

/* NOT delinearized: k runs to m inclusive, so a[i*m + m] is the next row's first element */
void sums_past_row(int n, int m, const double *a, double *s) {
  for (int i = 0; i < n; i++) {
    s[i] = 0.0;
    for (int k = 0; k <= m; k++)
      s[i] += a[i * m + k];
  }
}

static void fill(double *a, long count, int seed) {
  for (long k = 0; k < count; k++)
    a[k] = (double)((k * 7 + seed * 13) % 23) / 8.0 - 1.25;
}

int main(void) {
  int n = 13, m = 11, p = 7;
  long big = (long)n * m * p + m + 1;
  double *A = malloc(sizeof(double) * big);
  double *B = malloc(sizeof(double) * big);
  double *C = malloc(sizeof(double) * big);
  double *X = malloc(sizeof(double) * big);

  fill(A, big, 1);
  fill(B, big, 2);
  mm(n, m, p, C, A, B);
  REPORT("mm", C, n * p);

  fill(X, big, 3);
  fill(C, big, 8); /* stencil5 leaves the border as it is */
  stencil5(n, m, X, C);
  REPORT("stencil5", C, n * m);

  box_sums(n, m, p, A, C);
  REPORT("box_sums", C, n * m);

  mirror_rows(n, m, A, C);
  REPORT("mirror_rows", C, n * m);

  memcpy(C, A, sizeof(double) * n * m);
  shift_left_in_rows(n, m, C);
  REPORT("shift_left_in_rows", C, n * m);

  fill(C, big, 4);
  padded_add(n, m - 3, m, C, B);
  REPORT("padded_add", C, n * m);

  sums_past_row(n, m, A, C);
  REPORT("sums_past_row", C, n);

  /* overlapping arrays: C aliases A's and B's rows, so every result depends on the order */
  fill(X, big, 5);
  mm(m, m, m, X, X + m, X); /* C overlaps A one row later, and is B */
  REPORT("mm overlapping", X, m * m + m);

  fill(X, big, 6);
  stencil5(n, m, X, X + m); /* out is in, one row down: reads what it has just written */
  REPORT("stencil5 overlapping", X, n * m + m);

  fill(X, big, 7);
  mirror_rows(n, m, X, X + 2); /* b is a, two elements on */
  REPORT("mirror_rows overlapping", X, n * m + 2);

  free(A);
  free(B);
  free(C);
  free(X);
  return 0;
}
