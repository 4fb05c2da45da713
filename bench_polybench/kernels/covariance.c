/* covariance: sample covariance matrix cov (MxM) of the M columns of an NxM data matrix (N observations). */
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
    for (int j = 0; j < m; j++) data[i][j] = (DATA_TYPE)(i * j) / m;
}

static void kernel_covariance(int m, int n, DATA_TYPE float_n, DATA_TYPE data[N][M],
                              DATA_TYPE cov[M][M], DATA_TYPE mean[M]) {
  /* Column means. */
  for (int j = 0; j < m; j++) {
    mean[j] = 0.0;
    for (int i = 0; i < n; i++) mean[j] += data[i][j];
    mean[j] /= float_n;
  }

  /* Center the data. */
  for (int i = 0; i < n; i++)
    for (int j = 0; j < m; j++) data[i][j] -= mean[j];

  /* Covariance matrix (unbiased, divided by N - 1), symmetric. */
  for (int i = 0; i < m; i++)
    for (int j = i; j < m; j++) {
      cov[i][j] = 0.0;
      for (int k = 0; k < n; k++) cov[i][j] += data[k][i] * data[k][j];
      cov[i][j] /= (float_n - 1.0);
      cov[j][i] = cov[i][j];
    }
}

int main(void) {
  DATA_TYPE float_n;
  DATA_TYPE (*data)[M] = (DATA_TYPE (*)[M])BENCH_ALLOC(DATA_TYPE, N * M);
  DATA_TYPE (*cov)[M] = (DATA_TYPE (*)[M])BENCH_ALLOC(DATA_TYPE, M * M);
  DATA_TYPE *mean = BENCH_ALLOC(DATA_TYPE, M);
  do {
    init_array(M, N, &float_n, data);
    bench_timer_start();
    kernel_covariance(M, N, float_n, data, cov, mean);
    bench_timer_stop();
  } while (bench_again());
  bench_timer_print();
  bench_dump("cov", &cov[0][0], (long)M * M);
  bench_dump("mean", mean, M);
  free(data);
  free(cov);
  free(mean);
  return 0;
}
