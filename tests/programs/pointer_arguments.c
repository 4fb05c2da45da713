// polyflow: compiled=saxpy,rows_stencil,smooth3,scale_lower,mm_flat,odd_entries,row_sums,tail_copy,scale_in_place,int_prefix_pairs,gather
/* Arrays passed as plain C pointers, whose extents polyflow sizes at run time from what each
   function touches: disjoint calls, overlapping calls (y and y + 1), pointers into the middle
   of an array (p[-1]), row-major views of flat pointers, triangles, conditions, other element
   types, and a pointer read at data-dependent places (left unsized). */
#include <stdio.h>
#include <stdlib.h>

void saxpy(int n, double a, const double *x, double *y) {
  for (int i = 0; i < n; i++)
    y[i] = a * x[i] + y[i];
}

/* rows of a pointer to arrays, written to a flat pointer */
void rows_stencil(int n, int m, double (*A)[m], double *B) {
  for (int i = 1; i < n - 1; i++)
    for (int j = 0; j < m; j++)
      B[i * m + j] = 0.5 * (A[i - 1][j] + A[i + 1][j]);
}

/* reads p[-1]: called with a pointer into the middle of an array */
void smooth3(int n, const double *p, double *q) {
  for (int i = 0; i < n; i++)
    q[i] = (p[i - 1] + p[i] + p[i + 1]) / 3.0;
}

/* the lower triangle of a flat n x n matrix */
void scale_lower(int n, double *L, const double *d) {
  for (int i = 0; i < n; i++)
    for (int j = 0; j <= i; j++)
      L[i * n + j] = L[i * n + j] * d[i] + d[j];
}

void mm_flat(int n, int m, int p, const double *A, const double *B, double *C) {
  for (int i = 0; i < n; i++)
    for (int j = 0; j < p; j++) {
      C[i * p + j] = 0.0;
      for (int k = 0; k < m; k++)
        C[i * p + j] += A[i * m + k] * B[k * p + j];
    }
}

/* strided reads, a condition on the index */
void odd_entries(int n, const float *x, float *y) {
  for (int i = 0; i < n; i++)
    if (i >= 2)
      y[i - 2] = x[2 * i + 1] * 2.0f;
}

/* a pointer read, a sized array written */
void row_sums(int n, int m, const double *a, double out[n]) {
  for (int i = 0; i < n; i++) {
    double s = 0.0;
    for (int j = 0; j < m; j++)
      s += a[i * m + j];
    out[i] = s;
  }
}

/* only the tail of each array is touched */
void tail_copy(int n, int from, const long *src, long *dst) {
  for (int i = from; i < n; i++)
    dst[i] = src[i] * 3 + 1;
}

void scale_in_place(int n, double *p) {
  for (int i = 0; i < n; i++)
    p[i] = p[i] * 0.5 + 1.0;
}

void int_prefix_pairs(int n, const int *a, int *b) {
  for (int i = 1; i < n; i++)
    b[i] = a[i] + a[i - 1];
}

/* x is read at data-dependent places: its extent stays unknown, the function as it was */
void gather(int n, const int *idx, const double *x, double *y) {
  for (int i = 0; i < n; i++)
    y[i] = x[idx[i]] * 2.0;
}

static double checksum(const double *v, int count) {
  double s = 0.0;
  for (int i = 0; i < count; i++)
    s += v[i] * (double)(i % 7 + 1);
  return s;
}

int main(void) {
  enum { N = 300, M = 37, P = 23 };
  double *x = malloc(N * sizeof(double));
  double *y = malloc((N + 1) * sizeof(double));
  for (int i = 0; i < N; i++) {
    x[i] = 0.25 * i - 3.0;
    y[i] = 1.0 / (i + 1);
  }
  y[N] = 2.0;
  saxpy(N, 3.0, x, y);
  printf("saxpy disjoint: %.15g\n", checksum(y, N + 1));
  saxpy(N, 0.5, y, y + 1); /* overlapping: y[i + 1] depends on the new y[i] */
  printf("saxpy overlapping: %.15g\n", checksum(y, N + 1));
  saxpy(N, 0.5, y, y); /* the same array */
  printf("saxpy same: %.15g\n", checksum(y, N + 1));

  double (*A)[M] = malloc(sizeof(double[N][M]));
  double *B = calloc(N * M, sizeof(double));
  for (int i = 0; i < N; i++)
    for (int j = 0; j < M; j++)
      A[i][j] = i + 0.01 * j;
  rows_stencil(N, M, A, B);
  printf("rows_stencil: %.15g\n", checksum(B, N * M));
  rows_stencil(N / 2, M, A, (double *)A + 5); /* overlapping */
  printf("rows_stencil overlapping: %.15g\n", checksum((double *)A, N * M));

  double *q = malloc(N * sizeof(double));
  smooth3(N - 2, x + 1, q);
  printf("smooth3: %.15g\n", checksum(q, N - 2));

  double *L = malloc(N * N * sizeof(double));
  for (int i = 0; i < N * N; i++)
    L[i] = (i % 11) * 0.5;
  scale_lower(N, L, x);
  printf("scale_lower: %.15g\n", checksum(L, N * N));
  scale_lower(N / 3, L, L + 4); /* d overlaps L */
  printf("scale_lower overlapping: %.15g\n", checksum(L, N * N));

  double *C = malloc(N * P * sizeof(double));
  mm_flat(N / 4, M, P, (double *)A, B, C);
  printf("mm_flat: %.15g\n", checksum(C, (N / 4) * P));
  mm_flat(7, 7, 7, C, C + 49, C + 98);
  printf("mm_flat chained: %.15g\n", checksum(C, 147));

  float *f = malloc(2 * N * sizeof(float)), *g = calloc(N, sizeof(float));
  for (int i = 0; i < 2 * N; i++)
    f[i] = (float)(i % 13) - 6.0f;
  odd_entries(N - 1, f, g);
  double fs = 0.0;
  for (int i = 0; i < N; i++)
    fs += g[i] * (i % 5 + 1);
  printf("odd_entries: %.9g\n", fs);

  double *sums = malloc(N * sizeof(double));
  row_sums(N, M, (double *)A, sums);
  printf("row_sums: %.15g\n", checksum(sums, N));

  long *ls = malloc(N * sizeof(long)), *ld = calloc(N, sizeof(long));
  for (int i = 0; i < N; i++)
    ls[i] = i * 7 - 100;
  tail_copy(N, N - 40, ls, ld);
  tail_copy(N - 1, 10, ld + 1, ld); /* overlapping, backwards */
  long lsum = 0;
  for (int i = 0; i < N; i++)
    lsum += ld[i] * (i % 3 + 1);
  printf("tail_copy: %ld\n", lsum);

  scale_in_place(N, x);
  printf("scale_in_place: %.15g\n", checksum(x, N));

  int *ia = malloc(N * sizeof(int)), *ib = calloc(N, sizeof(int));
  for (int i = 0; i < N; i++)
    ia[i] = (i * 37) % 101 - 50;
  int_prefix_pairs(N, ia, ib);
  int_prefix_pairs(N, ib, ib); /* in place: each b[i] reads the b[i - 1] just written */
  long isum = 0;
  for (int i = 0; i < N; i++)
    isum += (long)ib[i] * (i % 4 + 1);
  printf("int_prefix_pairs: %ld\n", isum);

  for (int i = 0; i < N; i++)
    ia[i] = (i * 31) % N;
  gather(N, ia, x, y);
  printf("gather: %.15g\n", checksum(y, N));

  free(x), free(y), free(A), free(B), free(q), free(L), free(C), free(f), free(g), free(sums);
  free(ls), free(ld), free(ia), free(ib);
  return 0;
}
