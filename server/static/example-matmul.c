#include <stdio.h>

#define N 256

static double A[N][N], B[N][N], C[N][N];

void matmul(int n, double a[N][N], double b[N][N], double c[N][N]) {
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++)
      c[i][j] = 0.0;
  for (int i = 0; i < n; i++)
    for (int k = 0; k < n; k++)
      for (int j = 0; j < n; j++)
        c[i][j] += a[i][k] * b[k][j];
}

int main(void) {
  for (int i = 0; i < N; i++)
    for (int j = 0; j < N; j++) {
      A[i][j] = (double)((i * 7 + j * 3) % 17) / 17.0;
      B[i][j] = (double)((i * 5 + j * 11) % 13) / 13.0;
    }
  matmul(N, A, B, C);
  double sum = 0.0;
  for (int i = 0; i < N; i++)
    for (int j = 0; j < N; j++)
      sum += C[i][j] * (i + 1) / (j + 1);
  printf("%.9f\n", sum);
  return 0;
}
