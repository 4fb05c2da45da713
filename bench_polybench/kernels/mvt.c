/* mvt: two matrix-vector products with a matrix and its transpose, x1 += A y1 and x2 += A^T y2. */
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

static void init_array(int n, DATA_TYPE x1[N], DATA_TYPE x2[N], DATA_TYPE y_1[N], DATA_TYPE y_2[N],
                       DATA_TYPE A[N][N]) {
  for (int i = 0; i < n; i++) {
    x1[i] = (DATA_TYPE)(i % n) / n;
    x2[i] = (DATA_TYPE)((i + 1) % n) / n;
    y_1[i] = (DATA_TYPE)((i + 3) % n) / n;
    y_2[i] = (DATA_TYPE)((i + 4) % n) / n;
    for (int j = 0; j < n; j++) A[i][j] = (DATA_TYPE)(i * j % n) / n;
  }
}

static void kernel_mvt(int n, DATA_TYPE x1[N], DATA_TYPE x2[N], DATA_TYPE y_1[N], DATA_TYPE y_2[N],
                       DATA_TYPE A[N][N]) {
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++) x1[i] = x1[i] + A[i][j] * y_1[j];
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++) x2[i] = x2[i] + A[j][i] * y_2[j];
}

int main(void) {
  DATA_TYPE *x1 = BENCH_ALLOC(DATA_TYPE, N);
  DATA_TYPE *x2 = BENCH_ALLOC(DATA_TYPE, N);
  DATA_TYPE *y_1 = BENCH_ALLOC(DATA_TYPE, N);
  DATA_TYPE *y_2 = BENCH_ALLOC(DATA_TYPE, N);
  DATA_TYPE (*A)[N] = (DATA_TYPE (*)[N])BENCH_ALLOC(DATA_TYPE, N * N);

  do {
    init_array(N, x1, x2, y_1, y_2, A);
    bench_timer_start();
    kernel_mvt(N, x1, x2, y_1, y_2, A);
    bench_timer_stop();
  } while (bench_again());
  bench_timer_print();

  bench_dump("x1", x1, N);
  bench_dump("x2", x2, N);

  free(x1);
  free(x2);
  free(y_1);
  free(y_2);
  free(A);
  return 0;
}
