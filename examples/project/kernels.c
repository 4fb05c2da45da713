/* C = alpha * A * B + beta * C (row-major, ni x nk times nk x nj), and a five-point Jacobi
   stencil run `steps` times between A and B (n x n, borders fixed). */
#include "kernels.h"

void gemm(int ni, int nj, int nk, double alpha, double beta, double *C, const double *A,
          const double *B) {
  for (int i = 0; i < ni; i++) {
    for (int j = 0; j < nj; j++) C[i * nj + j] *= beta;
    for (int k = 0; k < nk; k++)
      for (int j = 0; j < nj; j++) C[i * nj + j] += alpha * A[i * nk + k] * B[k * nj + j];
  }
}

void jacobi_2d(int steps, int n, double *A, double *B) {
  for (int t = 0; t < steps; t++) {
    for (int i = 1; i < n - 1; i++)
      for (int j = 1; j < n - 1; j++)
        B[i * n + j] = 0.2 * (A[i * n + j] + A[i * n + j - 1] + A[i * n + j + 1] +
                              A[(i - 1) * n + j] + A[(i + 1) * n + j]);
    for (int i = 1; i < n - 1; i++)
      for (int j = 1; j < n - 1; j++)
        A[i * n + j] = 0.2 * (B[i * n + j] + B[i * n + j - 1] + B[i * n + j + 1] +
                              B[(i - 1) * n + j] + B[(i + 1) * n + j]);
  }
}
