/* symm: symmetric matrix multiply, C := alpha * A * B + beta * C with A MxM symmetric (only its lower triangle read). */
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

static void init_array(int m, int n, DATA_TYPE *alpha, DATA_TYPE *beta, DATA_TYPE C[M][N],
                       DATA_TYPE A[M][M], DATA_TYPE B[M][N]) {
  *alpha = 1.5;
  *beta = 1.2;
  for (int i = 0; i < m; i++)
    for (int j = 0; j < n; j++) {
      C[i][j] = (DATA_TYPE)((i + j) % 100) / m;
      B[i][j] = (DATA_TYPE)((n + i - j) % 100) / m;
    }
  /* Only the lower triangle is meaningful; the upper one holds a marker the kernel never reads. */
  for (int i = 0; i < m; i++) {
    for (int j = 0; j <= i; j++) A[i][j] = (DATA_TYPE)((i + j) % 100) / m;
    for (int j = i + 1; j < m; j++) A[i][j] = -999.0;
  }
}

static void kernel_symm(int m, int n, DATA_TYPE alpha, DATA_TYPE beta, DATA_TYPE C[M][N],
                        DATA_TYPE A[M][M], DATA_TYPE B[M][N]) {
  DATA_TYPE temp2;
  for (int i = 0; i < m; i++)
    for (int j = 0; j < n; j++) {
      temp2 = 0.0;
      for (int k = 0; k < i; k++) {
        C[k][j] += alpha * B[i][j] * A[i][k];
        temp2 += B[k][j] * A[i][k];
      }
      C[i][j] = beta * C[i][j] + alpha * B[i][j] * A[i][i] + alpha * temp2;
    }
}

int main(void) {
  DATA_TYPE alpha, beta;
  DATA_TYPE (*C)[N] = (DATA_TYPE (*)[N])BENCH_ALLOC(DATA_TYPE, M * N);
  DATA_TYPE (*A)[M] = (DATA_TYPE (*)[M])BENCH_ALLOC(DATA_TYPE, M * M);
  DATA_TYPE (*B)[N] = (DATA_TYPE (*)[N])BENCH_ALLOC(DATA_TYPE, M * N);
  do {
    init_array(M, N, &alpha, &beta, C, A, B);
    bench_timer_start();
    kernel_symm(M, N, alpha, beta, C, A, B);
    bench_timer_stop();
  } while (bench_again());
  bench_timer_print();
  bench_dump("C", &C[0][0], (long)M * N);
  free(C);
  free(A);
  free(B);
  return 0;
}
