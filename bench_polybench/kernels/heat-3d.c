/* heat-3d: explicit 3-D heat equation, a 7-point stencil applied alternately from A to B and from B to A each time step. */
#include "bench.h"

#if defined(MINI_DATASET)
#define TSTEPS 20
#define N 10
#elif defined(SMALL_DATASET)
#define TSTEPS 40
#define N 20
#elif defined(MEDIUM_DATASET)
#define TSTEPS 100
#define N 40
#elif defined(LARGE_DATASET)
#define TSTEPS 500
#define N 120
#else /* EXTRALARGE_DATASET */
#define TSTEPS 1000
#define N 200
#endif

static void init_array(int n, DATA_TYPE A[N][N][N], DATA_TYPE B[N][N][N]) {
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++)
      for (int k = 0; k < n; k++) {
        A[i][j][k] = (DATA_TYPE)(i + j + (n - k)) * 10 / n;
        B[i][j][k] = A[i][j][k];
      }
}

static void kernel_heat_3d(int tsteps, int n, DATA_TYPE A[N][N][N], DATA_TYPE B[N][N][N]) {
  for (int t = 1; t <= tsteps; t++) {
    for (int i = 1; i < n - 1; i++)
      for (int j = 1; j < n - 1; j++)
        for (int k = 1; k < n - 1; k++)
          B[i][j][k] = (DATA_TYPE)0.125 * (A[i + 1][j][k] - (DATA_TYPE)2.0 * A[i][j][k] + A[i - 1][j][k]) +
                       (DATA_TYPE)0.125 * (A[i][j + 1][k] - (DATA_TYPE)2.0 * A[i][j][k] + A[i][j - 1][k]) +
                       (DATA_TYPE)0.125 * (A[i][j][k + 1] - (DATA_TYPE)2.0 * A[i][j][k] + A[i][j][k - 1]) +
                       A[i][j][k];
    for (int i = 1; i < n - 1; i++)
      for (int j = 1; j < n - 1; j++)
        for (int k = 1; k < n - 1; k++)
          A[i][j][k] = (DATA_TYPE)0.125 * (B[i + 1][j][k] - (DATA_TYPE)2.0 * B[i][j][k] + B[i - 1][j][k]) +
                       (DATA_TYPE)0.125 * (B[i][j + 1][k] - (DATA_TYPE)2.0 * B[i][j][k] + B[i][j - 1][k]) +
                       (DATA_TYPE)0.125 * (B[i][j][k + 1] - (DATA_TYPE)2.0 * B[i][j][k] + B[i][j][k - 1]) +
                       B[i][j][k];
  }
}

int main(void) {
  int tsteps = TSTEPS, n = N;
  DATA_TYPE (*A)[N][N] = (DATA_TYPE (*)[N][N])BENCH_ALLOC(DATA_TYPE, N * N * N);
  DATA_TYPE (*B)[N][N] = (DATA_TYPE (*)[N][N])BENCH_ALLOC(DATA_TYPE, N * N * N);

  do {
    init_array(n, A, B);
    bench_timer_start();
    kernel_heat_3d(tsteps, n, A, B);
    bench_timer_stop();
  } while (bench_again());
  bench_timer_print();

  bench_dump("A", &A[0][0][0], (long)N * N * N);

  free(A);
  free(B);
  return 0;
}
