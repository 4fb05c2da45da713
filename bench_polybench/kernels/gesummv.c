/* gesummv: sum of two matrix-vector products, y := alpha * A * x + beta * B * x. */
#include "bench.h"

#if defined(MINI_DATASET)
#define N 30
#elif defined(SMALL_DATASET)
#define N 90
#elif defined(MEDIUM_DATASET)
#define N 250
#elif defined(LARGE_DATASET)
#define N 1300
#else
#define N 2800
#endif

static void init_array(int n, DATA_TYPE *alpha, DATA_TYPE *beta, DATA_TYPE A[N][N],
                       DATA_TYPE B[N][N], DATA_TYPE x[N]) {
  *alpha = 1.5;
  *beta = 1.2;
  for (int i = 0; i < n; i++) {
    x[i] = (DATA_TYPE)(i % n) / n;
    for (int j = 0; j < n; j++) {
      A[i][j] = (DATA_TYPE)((i * j + 1) % n) / n;
      B[i][j] = (DATA_TYPE)((i * j + 2) % n) / n;
    }
  }
}

static void kernel_gesummv(int n, DATA_TYPE alpha, DATA_TYPE beta, DATA_TYPE A[N][N],
                           DATA_TYPE B[N][N], DATA_TYPE tmp[N], DATA_TYPE x[N], DATA_TYPE y[N]) {
  for (int i = 0; i < n; i++) {
    tmp[i] = 0.0;
    y[i] = 0.0;
    for (int j = 0; j < n; j++) {
      tmp[i] = A[i][j] * x[j] + tmp[i];
      y[i] = B[i][j] * x[j] + y[i];
    }
    y[i] = alpha * tmp[i] + beta * y[i];
  }
}

int main(void) {
  DATA_TYPE alpha, beta;
  DATA_TYPE (*A)[N] = (DATA_TYPE (*)[N])BENCH_ALLOC(DATA_TYPE, N * N);
  DATA_TYPE (*B)[N] = (DATA_TYPE (*)[N])BENCH_ALLOC(DATA_TYPE, N * N);
  DATA_TYPE *tmp = BENCH_ALLOC(DATA_TYPE, N);
  DATA_TYPE *x = BENCH_ALLOC(DATA_TYPE, N);
  DATA_TYPE *y = BENCH_ALLOC(DATA_TYPE, N);
  do {
    init_array(N, &alpha, &beta, A, B, x);
    bench_timer_start();
    kernel_gesummv(N, alpha, beta, A, B, tmp, x, y);
    bench_timer_stop();
  } while (bench_again());
  bench_timer_print();
  bench_dump("y", y, N);
  bench_dump("tmp", tmp, N);
  free(A);
  free(B);
  free(tmp);
  free(x);
  free(y);
  return 0;
}
