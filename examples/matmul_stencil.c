/* matmul_stencil.c: three loop-nest kernels in one ordinary C program.
 *
 * main() allocates, times and prints with libc, so the C compiler keeps it;
 * the kernels below are plain affine loop nests that polyflow compiles.
 *
 *   polyflow build examples/matmul_stencil.c -o matmul_stencil -march=native
 *   ./matmul_stencil
 *
 * Output: one "time <kernel>: <seconds>" line per kernel, then "checksum: <value>".
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define N 800   /* matrix multiply: N x N */
#define M 1200  /* Jacobi grid: M x M */
#define TSTEPS 60

void init_matrices(double A[N][N], double B[N][N], double C[N][N]) {
  for (int i = 0; i < N; i++)
    for (int j = 0; j < N; j++) {
      A[i][j] = (double)((i * j + 1) % N) / N;
      B[i][j] = (double)((i * (j + 1) + 2) % N) / N;
      C[i][j] = 0.0;
    }
}

void init_grid(double G[M][M], double H[M][M]) {
  for (int i = 0; i < M; i++)
    for (int j = 0; j < M; j++) {
      G[i][j] = ((double)i * (j + 2) + 2) / M;
      H[i][j] = ((double)i * (j + 3) + 3) / M;
    }
}

/* C = A * B, in the textbook i-j-k order (the k loop strides down B's columns). */
void matmul(double C[N][N], double A[N][N], double B[N][N]) {
  for (int i = 0; i < N; i++)
    for (int j = 0; j < N; j++) {
      double acc = 0.0;
      for (int k = 0; k < N; k++)
        acc += A[i][k] * B[k][j];
      C[i][j] = acc;
    }
}

/* TSTEPS double sweeps of a 5-point Jacobi stencil, G -> H -> G. */
void jacobi2d(double G[M][M], double H[M][M]) {
  for (int t = 0; t < TSTEPS; t++) {
    for (int i = 1; i < M - 1; i++)
      for (int j = 1; j < M - 1; j++)
        H[i][j] = 0.2 * (G[i][j] + G[i][j - 1] + G[i][j + 1] + G[i + 1][j] + G[i - 1][j]);
    for (int i = 1; i < M - 1; i++)
      for (int j = 1; j < M - 1; j++)
        G[i][j] = 0.2 * (H[i][j] + H[i][j - 1] + H[i][j + 1] + H[i + 1][j] + H[i - 1][j]);
  }
}

/* A reduction: the weighted sum of the product matrix and the grid's interior. */
double weighted_sum(double C[N][N], double G[M][M]) {
  double s = 0.0;
  for (int i = 0; i < N; i++)
    for (int j = 0; j < N; j++)
      s += C[i][j] * (1.0 + (double)(i % 7) * 0.125) + G[i + 1][j + 1];
  return s;
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int main(void) {
  double (*A)[N] = malloc(sizeof(double[N][N]));
  double (*B)[N] = malloc(sizeof(double[N][N]));
  double (*C)[N] = malloc(sizeof(double[N][N]));
  double (*G)[M] = malloc(sizeof(double[M][M]));
  double (*H)[M] = malloc(sizeof(double[M][M]));
  if (!A || !B || !C || !G || !H) {
    fprintf(stderr, "out of memory\n");
    return 1;
  }
  init_matrices(A, B, C);
  init_grid(G, H);

  double t0 = now();
  matmul(C, A, B);
  double t1 = now();
  jacobi2d(G, H);
  double t2 = now();
  double s = weighted_sum(C, G);
  double t3 = now();

  printf("time matmul: %.6f\n", t1 - t0);
  printf("time jacobi2d: %.6f\n", t2 - t1);
  printf("time weighted_sum: %.6f\n", t3 - t2);
  printf("checksum: %.12e\n", s);

  free(A);
  free(B);
  free(C);
  free(G);
  free(H);
  return 0;
}
