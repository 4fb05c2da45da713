/* gemver: rank-2 update A := A + u1*v1^T + u2*v2^T, then x := x + beta * A^T * y + z and w := w + alpha * A * x. */
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

static void init_array(int n, DATA_TYPE *alpha, DATA_TYPE *beta, DATA_TYPE A[N][N],
                       DATA_TYPE u1[N], DATA_TYPE v1[N], DATA_TYPE u2[N], DATA_TYPE v2[N],
                       DATA_TYPE w[N], DATA_TYPE x[N], DATA_TYPE y[N], DATA_TYPE z[N]) {
  DATA_TYPE fn = (DATA_TYPE)n;
  *alpha = 1.5;
  *beta = 1.2;
  for (int i = 0; i < n; i++) {
    u1[i] = i;
    u2[i] = ((i + 1) / fn) / 2.0;
    v1[i] = ((i + 1) / fn) / 4.0;
    v2[i] = ((i + 1) / fn) / 6.0;
    y[i] = ((i + 1) / fn) / 8.0;
    z[i] = ((i + 1) / fn) / 9.0;
    x[i] = 0.0;
    w[i] = 0.0;
    for (int j = 0; j < n; j++) A[i][j] = (DATA_TYPE)(i * j % n) / n;
  }
}

static void kernel_gemver(int n, DATA_TYPE alpha, DATA_TYPE beta, DATA_TYPE A[N][N],
                          DATA_TYPE u1[N], DATA_TYPE v1[N], DATA_TYPE u2[N], DATA_TYPE v2[N],
                          DATA_TYPE w[N], DATA_TYPE x[N], DATA_TYPE y[N], DATA_TYPE z[N]) {
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++) A[i][j] = A[i][j] + u1[i] * v1[j] + u2[i] * v2[j];
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++) x[i] = x[i] + beta * A[j][i] * y[j];
  for (int i = 0; i < n; i++) x[i] = x[i] + z[i];
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++) w[i] = w[i] + alpha * A[i][j] * x[j];
}

int main(void) {
  DATA_TYPE alpha, beta;
  DATA_TYPE (*A)[N] = (DATA_TYPE (*)[N])BENCH_ALLOC(DATA_TYPE, N * N);
  DATA_TYPE *u1 = BENCH_ALLOC(DATA_TYPE, N);
  DATA_TYPE *v1 = BENCH_ALLOC(DATA_TYPE, N);
  DATA_TYPE *u2 = BENCH_ALLOC(DATA_TYPE, N);
  DATA_TYPE *v2 = BENCH_ALLOC(DATA_TYPE, N);
  DATA_TYPE *w = BENCH_ALLOC(DATA_TYPE, N);
  DATA_TYPE *x = BENCH_ALLOC(DATA_TYPE, N);
  DATA_TYPE *y = BENCH_ALLOC(DATA_TYPE, N);
  DATA_TYPE *z = BENCH_ALLOC(DATA_TYPE, N);
  do {
    init_array(N, &alpha, &beta, A, u1, v1, u2, v2, w, x, y, z);
    bench_timer_start();
    kernel_gemver(N, alpha, beta, A, u1, v1, u2, v2, w, x, y, z);
    bench_timer_stop();
  } while (bench_again());
  bench_timer_print();
  bench_dump("w", w, N);
  bench_dump("x", x, N);
  bench_dump("A", &A[0][0], (long)N * N);
  free(A);
  free(u1);
  free(v1);
  free(u2);
  free(v2);
  free(w);
  free(x);
  free(y);
  free(z);
  return 0;
}
