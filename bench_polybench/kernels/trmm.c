/* trmm: triangular matrix multiply, B := alpha * A^T * B with A MxM unit lower triangular (strict upper part ignored). */
#include "bench.h"

#if defined(MINI_DATASET)
#define M 20
#define N 30
#elif defined(SMALL_DATASET)
#define M 60
#define N 80
#elif defined(MEDIUM_DATASET)
#define M 200
#define N 240
#elif defined(LARGE_DATASET)
#define M 1000
#define N 1200
#else
#define M 2000
#define N 2600
#endif

static void init_array(int m, int n, DATA_TYPE *alpha, DATA_TYPE A[M][M], DATA_TYPE B[M][N]) {
  *alpha = 1.5;
  for (int i = 0; i < m; i++) {
    for (int j = 0; j < i; j++) A[i][j] = (DATA_TYPE)((i + j) % m) / m;
    A[i][i] = 1.0;
    for (int j = 0; j < n; j++) B[i][j] = (DATA_TYPE)((n + (i - j)) % n) / n;
  }
}

static void kernel_trmm(int m, int n, DATA_TYPE alpha, DATA_TYPE A[M][M], DATA_TYPE B[M][N]) {
  for (int i = 0; i < m; i++)
    for (int j = 0; j < n; j++) {
      for (int k = i + 1; k < m; k++) B[i][j] += A[k][i] * B[k][j];
      B[i][j] = alpha * B[i][j];
    }
}

int main(void) {
  DATA_TYPE alpha;
  DATA_TYPE (*A)[M] = (DATA_TYPE (*)[M])BENCH_ALLOC(DATA_TYPE, M * M);
  DATA_TYPE (*B)[N] = (DATA_TYPE (*)[N])BENCH_ALLOC(DATA_TYPE, M * N);
  do {
    init_array(M, N, &alpha, A, B);
    bench_timer_start();
    kernel_trmm(M, N, alpha, A, B);
    bench_timer_stop();
  } while (bench_again());
  bench_timer_print();
  bench_dump("B", &B[0][0], (long)M * N);
  free(A);
  free(B);
  return 0;
}
