/* adi: alternating-direction implicit solver for 2-D heat diffusion, each time step a tridiagonal (Thomas) solve along columns then along rows. */
#include "bench.h"

#if defined(MINI_DATASET)
#define TSTEPS 20
#define N 20
#elif defined(SMALL_DATASET)
#define TSTEPS 40
#define N 60
#elif defined(MEDIUM_DATASET)
#define TSTEPS 100
#define N 200
#elif defined(LARGE_DATASET)
#define TSTEPS 500
#define N 1000
#else /* EXTRALARGE_DATASET */
#define TSTEPS 1000
#define N 2000
#endif

static void init_array(int n, DATA_TYPE u[N][N]) {
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++)
      u[i][j] = (DATA_TYPE)(i + n - j) / n;
}

static void kernel_adi(int tsteps, int n, DATA_TYPE u[N][N], DATA_TYPE v[N][N],
                       DATA_TYPE p[N][N], DATA_TYPE q[N][N]) {
  DATA_TYPE DX = (DATA_TYPE)1.0 / (DATA_TYPE)n;
  DATA_TYPE DY = (DATA_TYPE)1.0 / (DATA_TYPE)n;
  DATA_TYPE DT = (DATA_TYPE)1.0 / (DATA_TYPE)tsteps;
  DATA_TYPE B1 = 2.0, B2 = 1.0;
  DATA_TYPE mul1 = B1 * DT / (DX * DX);
  DATA_TYPE mul2 = B2 * DT / (DY * DY);
  /* Coefficients of the two tridiagonal systems: (a, b, c) and (d, e, f). */
  DATA_TYPE a = -mul1 / (DATA_TYPE)2.0, b = (DATA_TYPE)1.0 + mul1, c = a;
  DATA_TYPE d = -mul2 / (DATA_TYPE)2.0, e = (DATA_TYPE)1.0 + mul2, f = d;

  for (int t = 1; t <= tsteps; t++) {
    /* Column sweep: u -> v. */
    for (int i = 1; i < n - 1; i++) {
      v[0][i] = 1.0;
      p[i][0] = 0.0;
      q[i][0] = v[0][i];
      for (int j = 1; j < n - 1; j++) {
        p[i][j] = -c / (a * p[i][j - 1] + b);
        q[i][j] = (-d * u[j][i - 1] + ((DATA_TYPE)1.0 + (DATA_TYPE)2.0 * d) * u[j][i] -
                   f * u[j][i + 1] - a * q[i][j - 1]) /
                  (a * p[i][j - 1] + b);
      }
      v[n - 1][i] = 1.0;
      for (int j = n - 2; j >= 1; j--)
        v[j][i] = p[i][j] * v[j + 1][i] + q[i][j];
    }
    /* Row sweep: v -> u. */
    for (int i = 1; i < n - 1; i++) {
      u[i][0] = 1.0;
      p[i][0] = 0.0;
      q[i][0] = u[i][0];
      for (int j = 1; j < n - 1; j++) {
        p[i][j] = -f / (d * p[i][j - 1] + e);
        q[i][j] = (-a * v[i - 1][j] + ((DATA_TYPE)1.0 + (DATA_TYPE)2.0 * a) * v[i][j] -
                   c * v[i + 1][j] - d * q[i][j - 1]) /
                  (d * p[i][j - 1] + e);
      }
      u[i][n - 1] = 1.0;
      for (int j = n - 2; j >= 1; j--)
        u[i][j] = p[i][j] * u[i][j + 1] + q[i][j];
    }
  }
}

int main(void) {
  int tsteps = TSTEPS, n = N;
  DATA_TYPE (*u)[N] = (DATA_TYPE (*)[N])BENCH_ALLOC(DATA_TYPE, N * N);
  DATA_TYPE (*v)[N] = (DATA_TYPE (*)[N])BENCH_ALLOC(DATA_TYPE, N * N);
  DATA_TYPE (*p)[N] = (DATA_TYPE (*)[N])BENCH_ALLOC(DATA_TYPE, N * N);
  DATA_TYPE (*q)[N] = (DATA_TYPE (*)[N])BENCH_ALLOC(DATA_TYPE, N * N);

  do {
    init_array(n, u);
    bench_timer_start();
    kernel_adi(tsteps, n, u, v, p, q);
    bench_timer_stop();
  } while (bench_again());
  bench_timer_print();

  bench_dump("u", &u[0][0], (long)N * N);

  free(u);
  free(v);
  free(p);
  free(q);
  return 0;
}
