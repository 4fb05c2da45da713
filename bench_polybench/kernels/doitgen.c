/* doitgen: multiresolution analysis kernel, each row A[r][q][:] of a 3-D array replaced by its product with C4. */
#include "bench.h"

#if defined(MINI_DATASET)
#define NQ 8
#define NR 10
#define NP 12
#elif defined(SMALL_DATASET)
#define NQ 20
#define NR 25
#define NP 30
#elif defined(MEDIUM_DATASET)
#define NQ 40
#define NR 50
#define NP 60
#elif defined(LARGE_DATASET)
#define NQ 140
#define NR 150
#define NP 160
#else
#define NQ 220
#define NR 250
#define NP 270
#endif

static void init_array(int nr, int nq, int np, DATA_TYPE A[NR][NQ][NP], DATA_TYPE C4[NP][NP]) {
  for (int r = 0; r < nr; r++)
    for (int q = 0; q < nq; q++)
      for (int p = 0; p < np; p++) A[r][q][p] = (DATA_TYPE)((r * q + p) % np) / np;
  for (int s = 0; s < np; s++)
    for (int p = 0; p < np; p++) C4[s][p] = (DATA_TYPE)(s * p % np) / np;
}

static void kernel_doitgen(int nr, int nq, int np, DATA_TYPE A[NR][NQ][NP], DATA_TYPE C4[NP][NP],
                           DATA_TYPE sum[NP]) {
  for (int r = 0; r < nr; r++)
    for (int q = 0; q < nq; q++) {
      for (int p = 0; p < np; p++) {
        sum[p] = 0.0;
        for (int s = 0; s < np; s++) sum[p] += A[r][q][s] * C4[s][p];
      }
      for (int p = 0; p < np; p++) A[r][q][p] = sum[p];
    }
}

int main(void) {
  DATA_TYPE (*A)[NQ][NP] = (DATA_TYPE (*)[NQ][NP])BENCH_ALLOC(DATA_TYPE, NR * NQ * NP);
  DATA_TYPE (*C4)[NP] = (DATA_TYPE (*)[NP])BENCH_ALLOC(DATA_TYPE, NP * NP);
  DATA_TYPE *sum = BENCH_ALLOC(DATA_TYPE, NP);

  do {
    init_array(NR, NQ, NP, A, C4);
    bench_timer_start();
    kernel_doitgen(NR, NQ, NP, A, C4, sum);
    bench_timer_stop();
  } while (bench_again());
  bench_timer_print();

  bench_dump("A", &A[0][0][0], (long)NR * NQ * NP);

  free(A);
  free(C4);
  free(sum);
  return 0;
}
