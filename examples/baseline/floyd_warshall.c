/* floyd_warshall: all-pairs shortest paths on an integer weight matrix (min via ?:).
 * Times only kernel_floyd_warshall. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define N 800

void init_array(int n, int path[n][n]) {
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++) {
      path[i][j] = i * j % 7 + 1;
      if ((i + j) % 13 == 0 || (i + j) % 7 == 0 || (i + j) % 11 == 0)
        path[i][j] = 999;
    }
}

void kernel_floyd_warshall(int n, int path[n][n]) {
  for (int k = 0; k < n; k++)
    for (int i = 0; i < n; i++)
      for (int j = 0; j < n; j++)
        path[i][j] = path[i][j] < path[i][k] + path[k][j] ? path[i][j] : path[i][k] + path[k][j];
}

long checksum(int n, int path[n][n]) {
  long s = 0;
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++)
      s += (long)path[i][j] * (1 + (i ^ j) % 5);
  return s;
}

int main(void) {
  int (*path)[N] = malloc(sizeof(int[N][N]));
  if (!path) {
    fprintf(stderr, "out of memory\n");
    return 1;
  }
  init_array(N, path);

  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  kernel_floyd_warshall(N, path);
  clock_gettime(CLOCK_MONOTONIC, &t1);

  printf("time: %.6f\n", (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec));
  printf("checksum: %ld\n", checksum(N, path));
  free(path);
  return 0;
}
