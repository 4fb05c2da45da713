/* jacobi-2d: 2-D Jacobi relaxation, a 5-point averaging stencil applied alternately from A to B and from B to A each time step. */
#include "bench.h"

#if defined(MINI_DATASET)
#define TSTEPS 20
#define N 30
#elif defined(SMALL_DATASET)
#define TSTEPS 40
#define N 90
#elif defined(MEDIUM_DATASET)
#define TSTEPS 100
#define N 250
#elif defined(LARGE_DATASET)
#define TSTEPS 500
#define N 1300
#else /* EXTRALARGE_DATASET */
#define TSTEPS 1000
#define N 2800
#endif

static void init_array(int n, DATA_TYPE A[N][N], DATA_TYPE B[N][N]) {
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++) {
      A[i][j] = ((DATA_TYPE)i * (j + 2) + 2) / n;
      B[i][j] = ((DATA_TYPE)i * (j + 3) + 3) / n;
    }
}

static void kernel_jacobi_2d(int tsteps, int n, DATA_TYPE A[N][N], DATA_TYPE B[N][N]) {
  for (int t = 0; t < tsteps; t++) {
    for (int i = 1; i < n - 1; i++)
      for (int j = 1; j < n - 1; j++)
        B[i][j] = (DATA_TYPE)0.2 * (A[i][j] + A[i][j - 1] + A[i][j + 1] + A[i + 1][j] + A[i - 1][j]);
    for (int i = 1; i < n - 1; i++)
      for (int j = 1; j < n - 1; j++)
        A[i][j] = (DATA_TYPE)0.2 * (B[i][j] + B[i][j - 1] + B[i][j + 1] + B[i + 1][j] + B[i - 1][j]);
  }
}

int main(void) {
  int tsteps = TSTEPS, n = N;
  DATA_TYPE (*A)[N] = (DATA_TYPE (*)[N])BENCH_ALLOC(DATA_TYPE, N * N);
  DATA_TYPE (*B)[N] = (DATA_TYPE (*)[N])BENCH_ALLOC(DATA_TYPE, N * N);

  do {
    init_array(n, A, B);
    bench_timer_start();
    kernel_jacobi_2d(tsteps, n, A, B);
    bench_timer_stop();
  } while (bench_again());
  bench_timer_print();

  bench_dump("A", &A[0][0], (long)N * N);

  free(A);
  free(B);
  return 0;
}
