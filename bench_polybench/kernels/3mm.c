/* 3mm: three chained matrix products, E = A*B, F = C*D, G = E*F. */
#include "bench.h"

#if defined(MINI_DATASET)
#define NI 16
#define NJ 18
#define NK 20
#define NL 22
#define NM 24
#elif defined(SMALL_DATASET)
#define NI 40
#define NJ 50
#define NK 60
#define NL 70
#define NM 80
#elif defined(MEDIUM_DATASET)
#define NI 180
#define NJ 190
#define NK 200
#define NL 210
#define NM 220
#elif defined(LARGE_DATASET)
#define NI 800
#define NJ 900
#define NK 1000
#define NL 1100
#define NM 1200
#else
#define NI 1600
#define NJ 1800
#define NK 2000
#define NL 2200
#define NM 2400
#endif

static void init_array(int ni, int nj, int nk, int nl, int nm, DATA_TYPE A[NI][NK], DATA_TYPE B[NK][NJ],
                       DATA_TYPE C[NJ][NM], DATA_TYPE D[NM][NL]) {
  for (int i = 0; i < ni; i++)
    for (int k = 0; k < nk; k++) A[i][k] = (DATA_TYPE)((i * k + 1) % ni) / (5 * ni);
  for (int k = 0; k < nk; k++)
    for (int j = 0; j < nj; j++) B[k][j] = (DATA_TYPE)((k * (j + 1) + 2) % nj) / (5 * nj);
  for (int j = 0; j < nj; j++)
    for (int m = 0; m < nm; m++) C[j][m] = (DATA_TYPE)(j * (m + 3) % nl) / (5 * nl);
  for (int m = 0; m < nm; m++)
    for (int l = 0; l < nl; l++) D[m][l] = (DATA_TYPE)((m * (l + 2) + 2) % nk) / (5 * nk);
}

static void kernel_3mm(int ni, int nj, int nk, int nl, int nm, DATA_TYPE E[NI][NJ], DATA_TYPE A[NI][NK],
                       DATA_TYPE B[NK][NJ], DATA_TYPE F[NJ][NL], DATA_TYPE C[NJ][NM], DATA_TYPE D[NM][NL],
                       DATA_TYPE G[NI][NL]) {
  /* E := A*B */
  for (int i = 0; i < ni; i++)
    for (int j = 0; j < nj; j++) {
      E[i][j] = 0.0;
      for (int k = 0; k < nk; k++) E[i][j] += A[i][k] * B[k][j];
    }
  /* F := C*D */
  for (int i = 0; i < nj; i++)
    for (int j = 0; j < nl; j++) {
      F[i][j] = 0.0;
      for (int k = 0; k < nm; k++) F[i][j] += C[i][k] * D[k][j];
    }
  /* G := E*F */
  for (int i = 0; i < ni; i++)
    for (int j = 0; j < nl; j++) {
      G[i][j] = 0.0;
      for (int k = 0; k < nj; k++) G[i][j] += E[i][k] * F[k][j];
    }
}

int main(void) {
  DATA_TYPE (*E)[NJ] = (DATA_TYPE (*)[NJ])BENCH_ALLOC(DATA_TYPE, NI * NJ);
  DATA_TYPE (*A)[NK] = (DATA_TYPE (*)[NK])BENCH_ALLOC(DATA_TYPE, NI * NK);
  DATA_TYPE (*B)[NJ] = (DATA_TYPE (*)[NJ])BENCH_ALLOC(DATA_TYPE, NK * NJ);
  DATA_TYPE (*F)[NL] = (DATA_TYPE (*)[NL])BENCH_ALLOC(DATA_TYPE, NJ * NL);
  DATA_TYPE (*C)[NM] = (DATA_TYPE (*)[NM])BENCH_ALLOC(DATA_TYPE, NJ * NM);
  DATA_TYPE (*D)[NL] = (DATA_TYPE (*)[NL])BENCH_ALLOC(DATA_TYPE, NM * NL);
  DATA_TYPE (*G)[NL] = (DATA_TYPE (*)[NL])BENCH_ALLOC(DATA_TYPE, NI * NL);

  do {
    init_array(NI, NJ, NK, NL, NM, A, B, C, D);
    bench_timer_start();
    kernel_3mm(NI, NJ, NK, NL, NM, E, A, B, F, C, D, G);
    bench_timer_stop();
  } while (bench_again());
  bench_timer_print();

  bench_dump("E", &E[0][0], (long)NI * NJ);
  bench_dump("F", &F[0][0], (long)NJ * NL);
  bench_dump("G", &G[0][0], (long)NI * NL);

  free(E);
  free(A);
  free(B);
  free(F);
  free(C);
  free(D);
  free(G);
  return 0;
}
