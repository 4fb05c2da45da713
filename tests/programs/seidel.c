// polyflow: compiled=init_seidel,kernel_seidel_2d,kernel_seidel_int
/* PolyBench seidel-2d: an in-place 9-point stencil iterated in time (every update reads values
   written earlier in the same sweep), plus an integer version. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REPORT_D(label, arr, count)                                 \
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

void init_seidel(int n, double A[n][n]) {
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++)
      A[i][j] = ((double)i * (j + 2) + 2) / n;
}

void kernel_seidel_2d(int tsteps, int n, double A[n][n]) {
  for (int t = 0; t <= tsteps - 1; t++)
    for (int i = 1; i <= n - 2; i++)
      for (int j = 1; j <= n - 2; j++)
        A[i][j] = (A[i - 1][j - 1] + A[i - 1][j] + A[i - 1][j + 1] + A[i][j - 1] + A[i][j] +
                   A[i][j + 1] + A[i + 1][j - 1] + A[i + 1][j] + A[i + 1][j + 1]) /
                  9.0;
}

void kernel_seidel_int(int tsteps, int n, int A[n][n]) {
  for (int t = 0; t < tsteps; t++)
    for (int i = 1; i < n - 1; i++)
      for (int j = 1; j < n - 1; j++)
        A[i][j] = (A[i - 1][j] + A[i][j - 1] + 2 * A[i][j] + A[i][j + 1] + A[i + 1][j]) / 6;
}

int main(void) {
  int n = 50, tsteps = 10;
  double (*A)[n] = malloc(sizeof(double) * n * n);
  int (*I)[n] = malloc(sizeof(int) * n * n);
  init_seidel(n, A);
  kernel_seidel_2d(tsteps, n, A);
  REPORT_D("A", &A[0][0], n * n);
  printf("A[1][1]=%.15g A[25][25]=%.15g A[48][48]=%.15g\n", A[1][1], A[25][25], A[n - 2][n - 2]);
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++)
      I[i][j] = (i * 131 + j * 71) % 1000;
  kernel_seidel_int(tsteps, n, I);
  long s = 0;
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++)
      s += (long)I[i][j] * (i + 2 * j + 1);
  printf("int seidel weighted=%ld I[1][1]=%d I[24][37]=%d\n", s, I[1][1], I[24][37]);

  free(A);
  free(I);
  return 0;
}
