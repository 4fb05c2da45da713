// polyflow: compiled=init_gemm,kernel_gemm,kernel_gemm_flat
/* PolyBench gemm: C = alpha * A * B + beta * C, with constant-size array parameters, and a
   flat-pointer variant with loop order i-k-j. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NI 48
#define NJ 56
#define NK 40

#define REPORT_D(label, arr, count)                                 \
  do {                                                              \
    double sum_ = 0.0;                                              \
    unsigned long hash_ = 14695981039346656037UL;                   \
    for (long k_ = 0; k_ < (long)(count); k_++) {                   \
      unsigned long bits_;                                          \
      memcpy(&bits_, &(arr)[k_], sizeof bits_);                     \
      sum_ += (arr)[k_];                                            \
      hash_ = (hash_ ^ bits_) * 1099511628211UL;                    \
    }                                                               \
    printf("%s: sum=%.15g hash=%lu\n", (label), sum_, hash_);       \
  } while (0)

void init_gemm(double C[NI][NJ], double A[NI][NK], double B[NK][NJ]) {
  for (int i = 0; i < NI; i++)
    for (int j = 0; j < NJ; j++)
      C[i][j] = (double)((i * j + 1) % NI) / NI;
  for (int i = 0; i < NI; i++)
    for (int k = 0; k < NK; k++)
      A[i][k] = (double)(i * (k + 1) % NK) / NK;
  for (int k = 0; k < NK; k++)
    for (int j = 0; j < NJ; j++)
      B[k][j] = (double)(k * (j + 2) % NJ) / NJ;
}

void kernel_gemm(double alpha, double beta, double C[NI][NJ], double A[NI][NK], double B[NK][NJ]) {
  for (int i = 0; i < NI; i++) {
    for (int j = 0; j < NJ; j++)
      C[i][j] *= beta;
    for (int k = 0; k < NK; k++)
      for (int j = 0; j < NJ; j++)
        C[i][j] += alpha * A[i][k] * B[k][j];
  }
}

void kernel_gemm_flat(int ni, int nj, int nk, double alpha, double beta, double *restrict C,
                      const double *restrict A, const double *restrict B) {
  for (int i = 0; i < ni; i++)
    for (int j = 0; j < nj; j++) {
      double acc = 0.0;
      for (int k = 0; k < nk; k++)
        acc += A[i * nk + k] * B[k * nj + j];
      C[i * nj + j] = beta * C[i * nj + j] + alpha * acc;
    }
}

int main(void) {
  double (*A)[NK] = malloc(sizeof(double) * NI * NK);
  double (*B)[NJ] = malloc(sizeof(double) * NK * NJ);
  double (*C)[NJ] = malloc(sizeof(double) * NI * NJ);
  double *C2 = malloc(sizeof(double) * NI * NJ);

  init_gemm(C, A, B);
  memcpy(C2, C, sizeof(double) * NI * NJ);
  REPORT_D("A", &A[0][0], NI * NK);
  REPORT_D("B", &B[0][0], NK * NJ);
  REPORT_D("C init", &C[0][0], NI * NJ);
  kernel_gemm(1.5, 1.2, C, A, B);
  REPORT_D("C", &C[0][0], NI * NJ);
  printf("C[0][0]=%.15g C[17][33]=%.15g C[47][55]=%.15g\n", C[0][0], C[17][33], C[NI - 1][NJ - 1]);
  kernel_gemm_flat(NI, NJ, NK, 1.5, 1.2, C2, &A[0][0], &B[0][0]);
  REPORT_D("C flat", C2, NI * NJ);
  printf("C2[17*NJ+33]=%.15g\n", C2[17 * NJ + 33]);

  free(A);
  free(B);
  free(C);
  free(C2);
  return 0;
}
