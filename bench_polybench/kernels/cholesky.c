/* cholesky: in-place Cholesky factorization A = L L^T of a symmetric positive definite matrix (L in the lower triangle). */
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

/* Symmetric, strictly diagonally dominant with a positive diagonal, hence positive definite:
 * off-diagonal entries in [0, 1), diagonal n. */
static void init_array(int n, DATA_TYPE A[N][N]) {
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++) A[i][j] = i == j ? (DATA_TYPE)n : (DATA_TYPE)((i * j + 1) % n) / n;
}

static void kernel_cholesky(int n, DATA_TYPE A[N][N]) {
  for (int i = 0; i < n; i++) {
    /* row i of L left of the diagonal */
    for (int j = 0; j < i; j++) {
      for (int k = 0; k < j; k++) A[i][j] -= A[i][k] * A[j][k];
      A[i][j] /= A[j][j];
    }
    /* diagonal element */
    for (int k = 0; k < i; k++) A[i][i] -= A[i][k] * A[i][k];
    A[i][i] = sqrt(A[i][i]);
  }
}

int main(void) {
  DATA_TYPE (*A)[N] = (DATA_TYPE (*)[N])BENCH_ALLOC(DATA_TYPE, N * N);

  do {
    init_array(N, A);
    bench_timer_start();
    kernel_cholesky(N, A);
    bench_timer_stop();
  } while (bench_again());
  bench_timer_print();

  bench_dump("A", &A[0][0], (long)N * N);

  free(A);
  return 0;
}
