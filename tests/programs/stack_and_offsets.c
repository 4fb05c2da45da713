// polyflow: compiled=local_array_in_loop,negative_offsets,incomplete_first_dim,row_offset_kernel
/* Local arrays declared inside loop bodies (their storage must be released every iteration, or
   the stack overflows), pointer parameters that point into the middle of an allocation and are
   read at negative offsets, array parameters with an omitted first dimension, and a 2-D kernel
   handed a matrix that starts at a later row. pointer_to_vla and global_pointer use forms
   outside the documented subset; polyflow may compile them or leave them to gcc. */
#include <stdio.h>
#include <stdlib.h>

#define M 8

double *gptr;

/* 20000 iterations x 8 KiB of locals: 160 MiB if the storage is never released */
double local_array_in_loop(int iters, const double *restrict x) {
  double total = 0.0;
  for (int it = 0; it < iters; it++) {
    double buf[1024];
    for (int k = 0; k < 1024; k++)
      buf[k] = x[(it + k) % 64] * (double)(k % 3);
    double s = 0.0;
    for (int k = 0; k < 1024; k += 97)
      s += buf[k];
    total += s;
  }
  return total;
}

/* p points at element 5 of its array: p[-5] .. p[-1] are valid */
void negative_offsets(int n, const double *p, double *restrict out) {
  for (int i = 0; i < n; i++)
    out[i] = p[i - 5] + 2.0 * p[i - 1] + *(p + i - 3);
}

double incomplete_first_dim(int n, double A[][M]) {
  double s = 0.0;
  for (int i = 0; i < n; i++)
    for (int j = 0; j < M; j++)
      s += A[i][j] * (double)(j + 1);
  return s;
}

void row_offset_kernel(int n, int m, double A[n][m]) {
  for (int i = 0; i < n; i++)
    for (int j = 0; j < m; j++)
      A[i][j] += (double)(i * 100 + j);
}

double pointer_to_vla(int n, int m, double (*A)[m]) {
  double s = 0.0;
  for (int i = 0; i < n; i++)
    for (int j = 0; j < m; j++)
      s += A[i][j] * (double)(i - j);
  return s;
}

double global_pointer(int n) {
  double s = 0.0;
  for (int i = 0; i < n; i++)
    s += gptr[i] * 0.5;
  return s;
}

int main(void) {
  double *x = malloc(sizeof(double) * 64);
  double *big = malloc(sizeof(double) * 40);
  double *out = malloc(sizeof(double) * 40);
  double (*A)[M] = malloc(sizeof(double) * 10 * M);
  for (int i = 0; i < 64; i++)
    x[i] = (double)(i % 9) * 0.125;
  for (int i = 0; i < 40; i++)
    big[i] = (double)(i * i % 17);
  for (int i = 0; i < 10 * M; i++)
    A[i / M][i % M] = (double)(i % 11) * 0.5;

  printf("local_array_in_loop=%.15g\n", local_array_in_loop(20000, x));
  negative_offsets(30, big + 5, out);
  double s = 0.0;
  for (int i = 0; i < 30; i++)
    s += out[i] * (double)(i + 1);
  printf("negative_offsets weighted=%.15g out[0]=%.15g\n", s, out[0]);
  printf("incomplete_first_dim=%.15g\n", incomplete_first_dim(10, A));
  row_offset_kernel(7, M, A + 3);
  printf("row_offset_kernel: A[2][7]=%.15g A[3][0]=%.15g A[9][7]=%.15g\n", A[2][7], A[3][0],
         A[9][7]);
  printf("pointer_to_vla=%.15g\n", pointer_to_vla(10, M, A));
  gptr = big + 3;
  printf("global_pointer=%.15g\n", global_pointer(20));

  free(x);
  free(big);
  free(out);
  free(A);
  return 0;
}
