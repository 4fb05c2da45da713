/* gramschmidt: QR decomposition of an M x N matrix by modified Gram-Schmidt, A = Q R (A overwritten by the residuals). */
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

/* Entries in [0, 1) plus m on the diagonal: the first min(m, n) columns are strictly diagonally dominant,
 * hence independent and well conditioned. (With the standard sizes m < n, so columns m .. n-1 are linearly
 * dependent on the first m whatever the data: their residuals are rounding noise, as in PolyBench.) */
static void init_array(int m, int n, DATA_TYPE A[M][N], DATA_TYPE R[N][N], DATA_TYPE Q[M][N]) {
  for (int i = 0; i < m; i++)
    for (int j = 0; j < n; j++) {
      A[i][j] = (DATA_TYPE)((i * j + 1) % m) / m + (i == j ? m : 0);
      Q[i][j] = 0.0;
    }
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++) R[i][j] = 0.0;
}

static void kernel_gramschmidt(int m, int n, DATA_TYPE A[M][N], DATA_TYPE R[N][N], DATA_TYPE Q[M][N]) {
  DATA_TYPE nrm;
  for (int k = 0; k < n; k++) {
    /* normalize column k */
    nrm = 0.0;
    for (int i = 0; i < m; i++) nrm += A[i][k] * A[i][k];
    R[k][k] = sqrt(nrm);
    for (int i = 0; i < m; i++) Q[i][k] = A[i][k] / R[k][k];
    /* remove its component from the later columns */
    for (int j = k + 1; j < n; j++) {
      R[k][j] = 0.0;
      for (int i = 0; i < m; i++) R[k][j] += Q[i][k] * A[i][j];
      for (int i = 0; i < m; i++) A[i][j] = A[i][j] - Q[i][k] * R[k][j];
    }
  }
}

int main(void) {
  DATA_TYPE (*A)[N] = (DATA_TYPE (*)[N])BENCH_ALLOC(DATA_TYPE, M * N);
  DATA_TYPE (*R)[N] = (DATA_TYPE (*)[N])BENCH_ALLOC(DATA_TYPE, N * N);
  DATA_TYPE (*Q)[N] = (DATA_TYPE (*)[N])BENCH_ALLOC(DATA_TYPE, M * N);

  do {
    init_array(M, N, A, R, Q);
    bench_timer_start();
    kernel_gramschmidt(M, N, A, R, Q);
    bench_timer_stop();
  } while (bench_again());
  bench_timer_print();

  /* With PolyBench's sizes M < N: columns M..N-1 of A lie in the span of the first M, so from
   * column M on, R[k][k], Q[:][k] and what is left of A are rounding noise that any reordering or
   * fused multiply-add changes completely. Validate what the mathematics determines: the first
   * min(M, N) columns of A and Q, and the first min(M, N) rows of R. */
  const int K = M < N ? M : N;
  DATA_TYPE *part = BENCH_ALLOC(DATA_TYPE, (long)M * K);
  for (int i = 0; i < M; i++)
    for (int k = 0; k < K; k++) part[(long)i * K + k] = A[i][k];
  bench_dump("A_first_columns", part, (long)M * K);
  bench_dump("R_first_rows", &R[0][0], (long)K * N);
  for (int i = 0; i < M; i++)
    for (int k = 0; k < K; k++) part[(long)i * K + k] = Q[i][k];
  bench_dump("Q_first_columns", part, (long)M * K);
  free(part);

  free(A);
  free(R);
  free(Q);
  return 0;
}
