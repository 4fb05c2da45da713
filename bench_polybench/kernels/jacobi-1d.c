/* jacobi-1d: 1-D Jacobi relaxation, a 3-point averaging stencil applied alternately from A to B and from B to A each time step. */
#include "bench.h"

#if defined(MINI_DATASET)
#define TSTEPS 20
#define N 30
#elif defined(SMALL_DATASET)
#define TSTEPS 40
#define N 120
#elif defined(MEDIUM_DATASET)
#define TSTEPS 100
#define N 400
#elif defined(LARGE_DATASET)
#define TSTEPS 500
#define N 2000
#else /* EXTRALARGE_DATASET */
#define TSTEPS 1000
#define N 4000
#endif

static void init_array(int n, DATA_TYPE A[N], DATA_TYPE B[N]) {
  for (int i = 0; i < n; i++) {
    A[i] = ((DATA_TYPE)i + 2) / n;
    B[i] = ((DATA_TYPE)i + 3) / n;
  }
}

static void kernel_jacobi_1d(int tsteps, int n, DATA_TYPE A[N], DATA_TYPE B[N]) {
  for (int t = 0; t < tsteps; t++) {
    for (int i = 1; i < n - 1; i++)
      B[i] = (DATA_TYPE)0.33333 * (A[i - 1] + A[i] + A[i + 1]);
    for (int i = 1; i < n - 1; i++)
      A[i] = (DATA_TYPE)0.33333 * (B[i - 1] + B[i] + B[i + 1]);
  }
}

int main(void) {
  int tsteps = TSTEPS, n = N;
  DATA_TYPE *A = BENCH_ALLOC(DATA_TYPE, N);
  DATA_TYPE *B = BENCH_ALLOC(DATA_TYPE, N);

  do {
    init_array(n, A, B);
    bench_timer_start();
    kernel_jacobi_1d(tsteps, n, A, B);
    bench_timer_stop();
  } while (bench_again());
  bench_timer_print();

  bench_dump("A", A, N);

  free(A);
  free(B);
  return 0;
}
