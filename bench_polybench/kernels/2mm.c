/* 2mm: two chained matrix products, tmp := alpha * A * B, then D := tmp * C + beta * D. */
#include "bench.h"

#if defined(MINI_DATASET)
#define NI 16
#define NJ 18
#define NK 22
#define NL 24
#elif defined(SMALL_DATASET)
#define NI 40
#define NJ 50
#define NK 70
#define NL 80
#elif defined(MEDIUM_DATASET)
#define NI 180
#define NJ 190
#define NK 210
#define NL 220
#elif defined(LARGE_DATASET)
#define NI 800
#define NJ 900
#define NK 1100
#define NL 1200
#else
#define NI 1600
#define NJ 1800
#define NK 2200
#define NL 2400
#endif

static void init_array(int ni, int nj, int nk, int nl, DATA_TYPE *alpha, DATA_TYPE *beta,
                       DATA_TYPE A[NI][NK], DATA_TYPE B[NK][NJ], DATA_TYPE C[NJ][NL],
                       DATA_TYPE D[NI][NL]) {
  *alpha = 1.5;
  *beta = 1.2;
  for (int i = 0; i < ni; i++)
    for (int k = 0; k < nk; k++) A[i][k] = (DATA_TYPE)((i * k + 1) % ni) / ni;
  for (int k = 0; k < nk; k++)
    for (int j = 0; j < nj; j++) B[k][j] = (DATA_TYPE)(k * (j + 1) % nj) / nj;
  for (int j = 0; j < nj; j++)
    for (int l = 0; l < nl; l++) C[j][l] = (DATA_TYPE)((j * (l + 3) + 1) % nl) / nl;
  for (int i = 0; i < ni; i++)
    for (int l = 0; l < nl; l++) D[i][l] = (DATA_TYPE)(i * (l + 2) % nk) / nk;
}

static void kernel_2mm(int ni, int nj, int nk, int nl, DATA_TYPE alpha, DATA_TYPE beta,
                       DATA_TYPE tmp[NI][NJ], DATA_TYPE A[NI][NK], DATA_TYPE B[NK][NJ],
                       DATA_TYPE C[NJ][NL], DATA_TYPE D[NI][NL]) {
  for (int i = 0; i < ni; i++)
    for (int j = 0; j < nj; j++) {
      tmp[i][j] = 0.0;
      for (int k = 0; k < nk; k++) tmp[i][j] += alpha * A[i][k] * B[k][j];
    }
  for (int i = 0; i < ni; i++)
    for (int l = 0; l < nl; l++) {
      D[i][l] *= beta;
      for (int j = 0; j < nj; j++) D[i][l] += tmp[i][j] * C[j][l];
    }
}

int main(void) {
  DATA_TYPE alpha, beta;
  DATA_TYPE (*tmp)[NJ] = (DATA_TYPE (*)[NJ])BENCH_ALLOC(DATA_TYPE, NI * NJ);
  DATA_TYPE (*A)[NK] = (DATA_TYPE (*)[NK])BENCH_ALLOC(DATA_TYPE, NI * NK);
  DATA_TYPE (*B)[NJ] = (DATA_TYPE (*)[NJ])BENCH_ALLOC(DATA_TYPE, NK * NJ);
  DATA_TYPE (*C)[NL] = (DATA_TYPE (*)[NL])BENCH_ALLOC(DATA_TYPE, NJ * NL);
  DATA_TYPE (*D)[NL] = (DATA_TYPE (*)[NL])BENCH_ALLOC(DATA_TYPE, NI * NL);
  do {
    init_array(NI, NJ, NK, NL, &alpha, &beta, A, B, C, D);
    bench_timer_start();
    kernel_2mm(NI, NJ, NK, NL, alpha, beta, tmp, A, B, C, D);
    bench_timer_stop();
  } while (bench_again());
  bench_timer_print();
  bench_dump("D", &D[0][0], (long)NI * NL);
  bench_dump("tmp", &tmp[0][0], (long)NI * NJ);
  free(tmp);
  free(A);
  free(B);
  free(C);
  free(D);
  return 0;
}
