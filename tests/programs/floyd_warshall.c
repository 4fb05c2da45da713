// polyflow: compiled=init_paths,kernel_floyd_warshall,count_reachable,kernel_floyd_double
/* PolyBench floyd-warshall on int distances (min through a ternary), a reachability count, and
   a double-precision version using fmin. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N 70
#define INF 100000

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

void init_paths(int n, int path[n][n]) {
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++) {
      path[i][j] = i * j % 7 + 1;
      if ((i + j) % 13 == 0 || (i + j) % 7 == 0 || (i + j) % 11 == 0)
        path[i][j] = INF;
      if (i == j)
        path[i][j] = 0;
    }
}

void kernel_floyd_warshall(int n, int path[n][n]) {
  for (int k = 0; k < n; k++)
    for (int i = 0; i < n; i++)
      for (int j = 0; j < n; j++)
        path[i][j] = path[i][j] < path[i][k] + path[k][j] ? path[i][j] : path[i][k] + path[k][j];
}

int count_reachable(int n, int path[n][n]) {
  int c = 0;
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++)
      if (path[i][j] < INF)
        c++;
  return c;
}

void kernel_floyd_double(int n, double D[n][n]) {
  for (int k = 0; k < n; k++)
    for (int i = 0; i < n; i++)
      for (int j = 0; j < n; j++)
        D[i][j] = fmin(D[i][j], D[i][k] + D[k][j]);
}

int main(void) {
  int (*P)[N] = malloc(sizeof(int) * N * N);
  double (*D)[N] = malloc(sizeof(double) * N * N);
  init_paths(N, P);
  for (int i = 0; i < N; i++)
    for (int j = 0; j < N; j++)
      D[i][j] = P[i][j] == INF ? 1e9 : (double)P[i][j] * 0.75 + (double)((i + 2 * j) % 5) / 8.0;
  printf("reachable before=%d\n", count_reachable(N, P));
  kernel_floyd_warshall(N, P);
  printf("reachable after=%d\n", count_reachable(N, P));
  long s = 0;
  for (int i = 0; i < N; i++)
    for (int j = 0; j < N; j++)
      s += (long)P[i][j] * ((i * N + j) % 97 + 1);
  printf("paths weighted=%ld P[0][1]=%d P[5][60]=%d P[69][3]=%d\n", s, P[0][1], P[5][60], P[N - 1][3]);
  kernel_floyd_double(N, D);
  REPORT_D("D", &D[0][0], N * N);
  printf("D[5][60]=%.15g\n", D[5][60]);

  free(P);
  free(D);
  return 0;
}
