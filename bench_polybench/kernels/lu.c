/* lu: in-place LU decomposition A = L U without pivoting (unit lower L below the diagonal, U on and above it). */
#include "bench.h"

#if defined(MINI_DATASET)
#define N 40
#elif defined(SMALL_DATASET)
#define N 120
#elif defined(MEDIUM_DATASET)
#define N 400
#elif defined(LARGE_DATASET)
#define N 2000
#else
#define N 4000
#endif

/* Symmetric, strictly diagonally dominant with a positive diagonal (so LU without pivoting is stable):
 * off-diagonal entries in [0, 1), diagonal n. */
static void init_array(int n, DATA_TYPE A[N][N]) {
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++) A[i][j] = i == j ? (DATA_TYPE)n : (DATA_TYPE)((i * j + 1) % n) / n;
}

static void kernel_lu(int n, DATA_TYPE A[N][N]) {
  for (int i = 0; i < n; i++) {
    /* row i of L */
    for (int j = 0; j < i; j++) {
      for (int k = 0; k < j; k++) A[i][j] -= A[i][k] * A[k][j];
      A[i][j] /= A[j][j];
    }
    /* row i of U */
    for (int j = i; j < n; j++)
      for (int k = 0; k < i; k++) A[i][j] -= A[i][k] * A[k][j];
  }
}

int main(void) {
  DATA_TYPE (*A)[N] = (DATA_TYPE (*)[N])BENCH_ALLOC(DATA_TYPE, N * N);

  do {
    init_array(N, A);
    bench_timer_start();
    kernel_lu(N, A);
    bench_timer_stop();
  } while (bench_again());
  bench_timer_print();

  bench_dump("A", &A[0][0], (long)N * N);

  free(A);
  return 0;
}
