/* syr2k: symmetric rank-2k update of the lower triangle, C := alpha * A * B^T + alpha * B * A^T + beta * C. */
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

static void init_array(int n, int m, DATA_TYPE *alpha, DATA_TYPE *beta, DATA_TYPE C[N][N],
                       DATA_TYPE A[N][M], DATA_TYPE B[N][M]) {
  *alpha = 1.5;
  *beta = 1.2;
  for (int i = 0; i < n; i++)
    for (int j = 0; j < m; j++) {
      A[i][j] = (DATA_TYPE)((i * j + 1) % n) / n;
      B[i][j] = (DATA_TYPE)((i * j + 2) % m) / m;
    }
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++) C[i][j] = (DATA_TYPE)((i * j + 3) % n) / m;
}

static void kernel_syr2k(int n, int m, DATA_TYPE alpha, DATA_TYPE beta, DATA_TYPE C[N][N],
                         DATA_TYPE A[N][M], DATA_TYPE B[N][M]) {
  for (int i = 0; i < n; i++) {
    for (int j = 0; j <= i; j++) C[i][j] *= beta;
    for (int k = 0; k < m; k++)
      for (int j = 0; j <= i; j++)
        C[i][j] += A[j][k] * alpha * B[i][k] + B[j][k] * alpha * A[i][k];
  }
}

int main(void) {
  DATA_TYPE alpha, beta;
  DATA_TYPE (*C)[N] = (DATA_TYPE (*)[N])BENCH_ALLOC(DATA_TYPE, N * N);
  DATA_TYPE (*A)[M] = (DATA_TYPE (*)[M])BENCH_ALLOC(DATA_TYPE, N * M);
  DATA_TYPE (*B)[M] = (DATA_TYPE (*)[M])BENCH_ALLOC(DATA_TYPE, N * M);
  do {
    init_array(N, M, &alpha, &beta, C, A, B);
    bench_timer_start();
    kernel_syr2k(N, M, alpha, beta, C, A, B);
    bench_timer_stop();
  } while (bench_again());
  bench_timer_print();
  bench_dump("C", &C[0][0], (long)N * N);
  free(C);
  free(A);
  free(B);
  return 0;
}
