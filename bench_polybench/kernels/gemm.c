/* gemm: general matrix multiply-accumulate, C := alpha * A * B + beta * C with A NIxNK, B NKxNJ, C NIxNJ. */
#include "bench.h"

#if defined(MINI_DATASET)
#define NI 20
#define NJ 25
#define NK 30
#elif defined(SMALL_DATASET)
#define NI 60
#define NJ 70
#define NK 80
#elif defined(MEDIUM_DATASET)
#define NI 200
#define NJ 220
#define NK 240
#elif defined(LARGE_DATASET)
#define NI 1000
#define NJ 1100
#define NK 1200
#else
#define NI 2000
#define NJ 2300
#define NK 2600
#endif

static void init_array(int ni, int nj, int nk, DATA_TYPE *alpha, DATA_TYPE *beta,
                       DATA_TYPE C[NI][NJ], DATA_TYPE A[NI][NK], DATA_TYPE B[NK][NJ]) {
  *alpha = 1.5;
  *beta = 1.2;
  for (int i = 0; i < ni; i++)
    for (int j = 0; j < nj; j++) C[i][j] = (DATA_TYPE)((i * j + 1) % ni) / ni;
  for (int i = 0; i < ni; i++)
    for (int k = 0; k < nk; k++) A[i][k] = (DATA_TYPE)(i * (k + 1) % nk) / nk;
  for (int k = 0; k < nk; k++)
    for (int j = 0; j < nj; j++) B[k][j] = (DATA_TYPE)(k * (j + 2) % nj) / nj;
}

static void kernel_gemm(int ni, int nj, int nk, DATA_TYPE alpha, DATA_TYPE beta,
                        DATA_TYPE C[NI][NJ], DATA_TYPE A[NI][NK], DATA_TYPE B[NK][NJ]) {
  for (int i = 0; i < ni; i++) {
    for (int j = 0; j < nj; j++) C[i][j] *= beta;
    for (int k = 0; k < nk; k++)
      for (int j = 0; j < nj; j++) C[i][j] += alpha * A[i][k] * B[k][j];
  }
}

int main(void) {
  DATA_TYPE alpha, beta;
  DATA_TYPE (*C)[NJ] = (DATA_TYPE (*)[NJ])BENCH_ALLOC(DATA_TYPE, NI * NJ);
  DATA_TYPE (*A)[NK] = (DATA_TYPE (*)[NK])BENCH_ALLOC(DATA_TYPE, NI * NK);
  DATA_TYPE (*B)[NJ] = (DATA_TYPE (*)[NJ])BENCH_ALLOC(DATA_TYPE, NK * NJ);
  do {
    init_array(NI, NJ, NK, &alpha, &beta, C, A, B);
    bench_timer_start();
    kernel_gemm(NI, NJ, NK, alpha, beta, C, A, B);
    bench_timer_stop();
  } while (bench_again());
  bench_timer_print();
  bench_dump("C", &C[0][0], (long)NI * NJ);
  free(C);
  free(A);
  free(B);
  return 0;
}
