/* Two kernels of a PolyBench-style program whose harness is a separate unit. */
#ifndef KERNELS_H
#define KERNELS_H
void gemm(int ni, int nj, int nk, double alpha, double beta, double *C, const double *A,
          const double *B);
void jacobi_2d(int steps, int n, double *A, double *B);
#endif
