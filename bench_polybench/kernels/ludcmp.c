/* ludcmp: solve A x = b by in-place LU decomposition without pivoting, then forward (L y = b) and back (U x = y) substitution. */
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

/* A symmetric, strictly diagonally dominant with a positive diagonal (off-diagonal entries in [0, 1),
 * diagonal n), so LU without pivoting is stable. */
static void init_array(int n, DATA_TYPE A[N][N], DATA_TYPE b[N]) {
  DATA_TYPE fn = (DATA_TYPE)n;
  for (int i = 0; i < n; i++) {
    b[i] = (i + 1) / fn / 2.0 + 4;
    for (int j = 0; j < n; j++) A[i][j] = i == j ? fn : (DATA_TYPE)((i * j + 1) % n) / n;
  }
}

static void kernel_ludcmp(int n, DATA_TYPE A[N][N], DATA_TYPE b[N], DATA_TYPE x[N], DATA_TYPE y[N]) {
  DATA_TYPE w;
  /* LU decomposition, row by row */
  for (int i = 0; i < n; i++) {
    for (int j = 0; j < i; j++) {
      w = A[i][j];
      for (int k = 0; k < j; k++) w -= A[i][k] * A[k][j];
      A[i][j] = w / A[j][j];
    }
    for (int j = i; j < n; j++) {
      w = A[i][j];
      for (int k = 0; k < i; k++) w -= A[i][k] * A[k][j];
      A[i][j] = w;
    }
  }
  /* forward substitution: L y = b (L unit lower) */
  for (int i = 0; i < n; i++) {
    w = b[i];
    for (int j = 0; j < i; j++) w -= A[i][j] * y[j];
    y[i] = w;
  }
  /* back substitution: U x = y */
  for (int i = n - 1; i >= 0; i--) {
    w = y[i];
    for (int j = i + 1; j < n; j++) w -= A[i][j] * x[j];
    x[i] = w / A[i][i];
  }
}

int main(void) {
  DATA_TYPE (*A)[N] = (DATA_TYPE (*)[N])BENCH_ALLOC(DATA_TYPE, N * N);
  DATA_TYPE *b = BENCH_ALLOC(DATA_TYPE, N);
  DATA_TYPE *x = BENCH_ALLOC(DATA_TYPE, N);
  DATA_TYPE *y = BENCH_ALLOC(DATA_TYPE, N);

  do {
    init_array(N, A, b);
    bench_timer_start();
    kernel_ludcmp(N, A, b, x, y);
    bench_timer_stop();
  } while (bench_again());
  bench_timer_print();

  bench_dump("A", &A[0][0], (long)N * N);
  bench_dump("y", y, N);
  bench_dump("x", x, N);

  free(A);
  free(b);
  free(x);
  free(y);
  return 0;
}
