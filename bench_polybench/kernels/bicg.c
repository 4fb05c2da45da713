/* bicg: the two matrix-vector products of BiCG, s = A^T r and q = A p, in one sweep over A. */
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

static void init_array(int m, int n, DATA_TYPE A[N][M], DATA_TYPE r[N], DATA_TYPE p[M]) {
  for (int j = 0; j < m; j++) p[j] = (DATA_TYPE)(j % m) / m;
  for (int i = 0; i < n; i++) {
    r[i] = (DATA_TYPE)(i % n) / n;
    for (int j = 0; j < m; j++) A[i][j] = (DATA_TYPE)(i * (j + 1) % n) / n;
  }
}

static void kernel_bicg(int m, int n, DATA_TYPE A[N][M], DATA_TYPE s[M], DATA_TYPE q[N], DATA_TYPE p[M],
                        DATA_TYPE r[N]) {
  for (int j = 0; j < m; j++) s[j] = 0.0;
  for (int i = 0; i < n; i++) {
    q[i] = 0.0;
    for (int j = 0; j < m; j++) {
      s[j] = s[j] + r[i] * A[i][j];
      q[i] = q[i] + A[i][j] * p[j];
    }
  }
}

int main(void) {
  DATA_TYPE (*A)[M] = (DATA_TYPE (*)[M])BENCH_ALLOC(DATA_TYPE, N * M);
  DATA_TYPE *s = BENCH_ALLOC(DATA_TYPE, M);
  DATA_TYPE *q = BENCH_ALLOC(DATA_TYPE, N);
  DATA_TYPE *p = BENCH_ALLOC(DATA_TYPE, M);
  DATA_TYPE *r = BENCH_ALLOC(DATA_TYPE, N);

  do {
    init_array(M, N, A, r, p);
    bench_timer_start();
    kernel_bicg(M, N, A, s, q, p, r);
    bench_timer_stop();
  } while (bench_again());
  bench_timer_print();

  bench_dump("s", s, M);
  bench_dump("q", q, N);

  free(A);
  free(s);
  free(q);
  free(p);
  free(r);
  return 0;
}
