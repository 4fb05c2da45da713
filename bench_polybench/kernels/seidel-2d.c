/* seidel-2d: 2-D Gauss-Seidel relaxation, each point replaced in place by the mean of its 3x3 neighbourhood, over several time steps. */
#include "bench.h"

#if defined(MINI_DATASET)
#define TSTEPS 20
#define N 40
#elif defined(SMALL_DATASET)
#define TSTEPS 40
#define N 120
#elif defined(MEDIUM_DATASET)
#define TSTEPS 100
#define N 400
#elif defined(LARGE_DATASET)
#define TSTEPS 500
#define N 2000
#else /* EXTRALARGE_DATASET */
#define TSTEPS 1000
#define N 4000
#endif

static void init_array(int n, DATA_TYPE A[N][N]) {
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++)
      A[i][j] = ((DATA_TYPE)i * (j + 2) + 2) / n;
}

static void kernel_seidel_2d(int tsteps, int n, DATA_TYPE A[N][N]) {
  for (int t = 0; t <= tsteps - 1; t++)
    for (int i = 1; i <= n - 2; i++)
      for (int j = 1; j <= n - 2; j++)
        A[i][j] = (A[i - 1][j - 1] + A[i - 1][j] + A[i - 1][j + 1] +
                   A[i][j - 1] + A[i][j] + A[i][j + 1] +
                   A[i + 1][j - 1] + A[i + 1][j] + A[i + 1][j + 1]) / (DATA_TYPE)9.0;
}

int main(void) {
  int tsteps = TSTEPS, n = N;
  DATA_TYPE (*A)[N] = (DATA_TYPE (*)[N])BENCH_ALLOC(DATA_TYPE, N * N);

  do {
    init_array(n, A);
    bench_timer_start();
    kernel_seidel_2d(tsteps, n, A);
    bench_timer_stop();
  } while (bench_again());
  bench_timer_print();

  bench_dump("A", &A[0][0], (long)N * N);

  free(A);
  return 0;
}
