/* trisolv: forward substitution, solving the lower-triangular system L x = b for x. */
#include "bench.h"

#if defined(MINI_DATASET)
#define N 40
#elif defined(SMALL_DATASET)
#define N 120
#elif defined(MEDIUM_DATASET)
#define N 400
#elif defined(LARGE_DATASET)
#define N 2000
#else /* EXTRALARGE_DATASET */
#define N 4000
#endif

/* L has a diagonal of 2 and off-diagonal entries below 1/n, so every row is strictly
 * diagonally dominant and the substitution stays bounded (|x| <= max|b| for any n). */
static void init_array(int n, DATA_TYPE L[N][N], DATA_TYPE x[N], DATA_TYPE b[N]) {
  for (int i = 0; i < n; i++) {
    x[i] = (DATA_TYPE)-999;
    b[i] = (DATA_TYPE)i / n;
    for (int j = 0; j < n; j++) {
      if (j < i)
        L[i][j] = (DATA_TYPE)((i + n - j + 1) % n) / ((DATA_TYPE)n * n);
      else if (j == i)
        L[i][j] = (DATA_TYPE)2.0;
      else
        L[i][j] = (DATA_TYPE)0.0;
    }
  }
}

static void kernel_trisolv(int n, DATA_TYPE L[N][N], DATA_TYPE x[N], DATA_TYPE b[N]) {
  for (int i = 0; i < n; i++) {
    x[i] = b[i];
    for (int j = 0; j < i; j++)
      x[i] -= L[i][j] * x[j];
    x[i] = x[i] / L[i][i];
  }
}

int main(void) {
  int n = N;
  DATA_TYPE (*L)[N] = (DATA_TYPE (*)[N])BENCH_ALLOC(DATA_TYPE, N * N);
  DATA_TYPE *x = BENCH_ALLOC(DATA_TYPE, N);
  DATA_TYPE *b = BENCH_ALLOC(DATA_TYPE, N);

  do {
    init_array(n, L, x, b);
    bench_timer_start();
    kernel_trisolv(n, L, x, b);
    bench_timer_stop();
  } while (bench_again());
  bench_timer_print();

  bench_dump("x", x, N);

  free(L);
  free(x);
  free(b);
  return 0;
}
