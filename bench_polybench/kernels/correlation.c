/* correlation: Pearson correlation matrix corr (MxM) of the M columns of an NxM data matrix (N observations). */
#include "bench.h"

#if defined(MINI_DATASET)
#define M 28
#define N 32
#elif defined(SMALL_DATASET)
#define M 80
#define N 100
#elif defined(MEDIUM_DATASET)
#define M 240
#define N 260
#elif defined(LARGE_DATASET)
#define M 1200
#define N 1400
#else
#define M 2600
#define N 3000
#endif

static void init_array(int m, int n, DATA_TYPE *float_n, DATA_TYPE data[N][M]) {
  *float_n = (DATA_TYPE)n;
  for (int i = 0; i < n; i++)
    for (int j = 0; j < m; j++) data[i][j] = (DATA_TYPE)(i * j) / m + i;
}

static void kernel_correlation(int m, int n, DATA_TYPE float_n, DATA_TYPE data[N][M],
                               DATA_TYPE corr[M][M], DATA_TYPE mean[M], DATA_TYPE stddev[M]) {
  DATA_TYPE eps = 0.1;

  /* Column means. */
  for (int j = 0; j < m; j++) {
    mean[j] = 0.0;
    for (int i = 0; i < n; i++) mean[j] += data[i][j];
    mean[j] /= float_n;
  }

  /* Column standard deviations; a near-zero one is replaced by 1 to avoid dividing by zero. */
  for (int j = 0; j < m; j++) {
    stddev[j] = 0.0;
    for (int i = 0; i < n; i++) stddev[j] += (data[i][j] - mean[j]) * (data[i][j] - mean[j]);
    stddev[j] /= float_n;
    stddev[j] = sqrt(stddev[j]);
    stddev[j] = stddev[j] <= eps ? 1.0 : stddev[j];
  }

  /* Center and reduce the data. */
  for (int i = 0; i < n; i++)
    for (int j = 0; j < m; j++) {
      data[i][j] -= mean[j];
      data[i][j] /= sqrt(float_n) * stddev[j];
    }

  /* Correlation matrix: symmetric, unit diagonal. */
  for (int i = 0; i < m - 1; i++) {
    corr[i][i] = 1.0;
    for (int j = i + 1; j < m; j++) {
      corr[i][j] = 0.0;
      for (int k = 0; k < n; k++) corr[i][j] += data[k][i] * data[k][j];
      corr[j][i] = corr[i][j];
    }
  }
  corr[m - 1][m - 1] = 1.0;
}

int main(void) {
  DATA_TYPE float_n;
  DATA_TYPE (*data)[M] = (DATA_TYPE (*)[M])BENCH_ALLOC(DATA_TYPE, N * M);
  DATA_TYPE (*corr)[M] = (DATA_TYPE (*)[M])BENCH_ALLOC(DATA_TYPE, M * M);
  DATA_TYPE *mean = BENCH_ALLOC(DATA_TYPE, M);
  DATA_TYPE *stddev = BENCH_ALLOC(DATA_TYPE, M);
  do {
    init_array(M, N, &float_n, data);
    bench_timer_start();
    kernel_correlation(M, N, float_n, data, corr, mean, stddev);
    bench_timer_stop();
  } while (bench_again());
  bench_timer_print();
  bench_dump("corr", &corr[0][0], (long)M * M);
  bench_dump("mean", mean, M);
  bench_dump("stddev", stddev, M);
  free(data);
  free(corr);
  free(mean);
  free(stddev);
  return 0;
}
