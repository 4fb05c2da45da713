/* atax: matrix transpose times matrix-vector product, y = A^T (A x). */
#include "bench.h"

#if defined(MINI_DATASET)
#define M 38
#define N 42
#elif defined(SMALL_DATASET)
#define M 116
#define N 124
#elif defined(MEDIUM_DATASET)
#define M 390
#define N 410
#elif defined(LARGE_DATASET)
#define M 1900
#define N 2100
#else
#define M 1800
#define N 2200
#endif

static void init_array(int m, int n, DATA_TYPE A[M][N], DATA_TYPE x[N]) {
  DATA_TYPE fn = (DATA_TYPE)n;
  for (int j = 0; j < n; j++) x[j] = 1 + j / fn;
  for (int i = 0; i < m; i++)
    for (int j = 0; j < n; j++) A[i][j] = (DATA_TYPE)((i + j) % n) / (5 * m);
}

static void kernel_atax(int m, int n, DATA_TYPE A[M][N], DATA_TYPE x[N], DATA_TYPE y[N], DATA_TYPE tmp[M]) {
  for (int j = 0; j < n; j++) y[j] = 0.0;
  for (int i = 0; i < m; i++) {
    tmp[i] = 0.0;
    for (int j = 0; j < n; j++) tmp[i] = tmp[i] + A[i][j] * x[j];
    for (int j = 0; j < n; j++) y[j] = y[j] + A[i][j] * tmp[i];
  }
}

int main(void) {
  DATA_TYPE (*A)[N] = (DATA_TYPE (*)[N])BENCH_ALLOC(DATA_TYPE, M * N);
  DATA_TYPE *x = BENCH_ALLOC(DATA_TYPE, N);
  DATA_TYPE *y = BENCH_ALLOC(DATA_TYPE, N);
  DATA_TYPE *tmp = BENCH_ALLOC(DATA_TYPE, M);

  do {
    init_array(M, N, A, x);
    bench_timer_start();
    kernel_atax(M, N, A, x, y, tmp);
    bench_timer_stop();
  } while (bench_again());
  bench_timer_print();

  bench_dump("y", y, N);

  free(A);
  free(x);
  free(y);
  free(tmp);
  return 0;
}
