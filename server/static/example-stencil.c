#include <stdio.h>

#define N 400
#define STEPS 20

static double A[N][N], B[N][N];

void jacobi(int steps, int n, double a[N][N], double b[N][N]) {
  for (int t = 0; t < steps; t++) {
    for (int i = 1; i < n - 1; i++)
      for (int j = 1; j < n - 1; j++)
        b[i][j] = 0.2 * (a[i][j] + a[i][j - 1] + a[i][j + 1] + a[i - 1][j] + a[i + 1][j]);
    for (int i = 1; i < n - 1; i++)
      for (int j = 1; j < n - 1; j++)
        a[i][j] = b[i][j];
  }
}

int main(void) {
  for (int i = 0; i < N; i++)
    for (int j = 0; j < N; j++)
      A[i][j] = B[i][j] = (double)((i * 3 + j * 5) % 23) / 23.0;
  jacobi(STEPS, N, A, B);
  double sum = 0.0;
  for (int i = 0; i < N; i++)
    for (int j = 0; j < N; j++)
      sum += A[i][j] * ((i + j) % 7 + 1);
  printf("%.9f\n", sum);
  return 0;
}
