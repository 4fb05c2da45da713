/* fdtd-2d: 2-D finite-difference time-domain simulation of Maxwell's equations, updating the electric fields ex, ey from the magnetic field hz and back. */
#include "bench.h"

#if defined(MINI_DATASET)
#define TMAX 20
#define NX 20
#define NY 30
#elif defined(SMALL_DATASET)
#define TMAX 40
#define NX 60
#define NY 80
#elif defined(MEDIUM_DATASET)
#define TMAX 100
#define NX 200
#define NY 240
#elif defined(LARGE_DATASET)
#define TMAX 500
#define NX 1000
#define NY 1200
#else /* EXTRALARGE_DATASET */
#define TMAX 1000
#define NX 2000
#define NY 2600
#endif

static void init_array(int tmax, int nx, int ny, DATA_TYPE ex[NX][NY], DATA_TYPE ey[NX][NY],
                       DATA_TYPE hz[NX][NY], DATA_TYPE fict[TMAX]) {
  for (int t = 0; t < tmax; t++)
    fict[t] = (DATA_TYPE)t;
  for (int i = 0; i < nx; i++)
    for (int j = 0; j < ny; j++) {
      ex[i][j] = ((DATA_TYPE)i * (j + 1)) / nx;
      ey[i][j] = ((DATA_TYPE)i * (j + 2)) / ny;
      hz[i][j] = ((DATA_TYPE)i * (j + 3)) / nx;
    }
}

static void kernel_fdtd_2d(int tmax, int nx, int ny, DATA_TYPE ex[NX][NY], DATA_TYPE ey[NX][NY],
                           DATA_TYPE hz[NX][NY], DATA_TYPE fict[TMAX]) {
  for (int t = 0; t < tmax; t++) {
    /* The source: the first row of ey is driven by the excitation. */
    for (int j = 0; j < ny; j++)
      ey[0][j] = fict[t];
    for (int i = 1; i < nx; i++)
      for (int j = 0; j < ny; j++)
        ey[i][j] = ey[i][j] - (DATA_TYPE)0.5 * (hz[i][j] - hz[i - 1][j]);
    for (int i = 0; i < nx; i++)
      for (int j = 1; j < ny; j++)
        ex[i][j] = ex[i][j] - (DATA_TYPE)0.5 * (hz[i][j] - hz[i][j - 1]);
    for (int i = 0; i < nx - 1; i++)
      for (int j = 0; j < ny - 1; j++)
        hz[i][j] = hz[i][j] - (DATA_TYPE)0.7 * (ex[i][j + 1] - ex[i][j] + ey[i + 1][j] - ey[i][j]);
  }
}

int main(void) {
  int tmax = TMAX, nx = NX, ny = NY;
  DATA_TYPE (*ex)[NY] = (DATA_TYPE (*)[NY])BENCH_ALLOC(DATA_TYPE, NX * NY);
  DATA_TYPE (*ey)[NY] = (DATA_TYPE (*)[NY])BENCH_ALLOC(DATA_TYPE, NX * NY);
  DATA_TYPE (*hz)[NY] = (DATA_TYPE (*)[NY])BENCH_ALLOC(DATA_TYPE, NX * NY);
  DATA_TYPE *fict = BENCH_ALLOC(DATA_TYPE, TMAX);

  do {
    init_array(tmax, nx, ny, ex, ey, hz, fict);
    bench_timer_start();
    kernel_fdtd_2d(tmax, nx, ny, ex, ey, hz, fict);
    bench_timer_stop();
  } while (bench_again());
  bench_timer_print();

  bench_dump("ex", &ex[0][0], (long)NX * NY);
  bench_dump("ey", &ey[0][0], (long)NX * NY);
  bench_dump("hz", &hz[0][0], (long)NX * NY);

  free(ex);
  free(ey);
  free(hz);
  free(fict);
  return 0;
}
