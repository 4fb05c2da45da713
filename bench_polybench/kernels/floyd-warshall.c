/* floyd-warshall: all-pairs shortest path lengths, relaxing every pair (i, j) through each intermediate vertex k in turn. */
#include "bench.h"

#if defined(MINI_DATASET)
#define N 60
#elif defined(SMALL_DATASET)
#define N 180
#elif defined(MEDIUM_DATASET)
#define N 500
#elif defined(LARGE_DATASET)
#define N 2800
#else /* EXTRALARGE_DATASET */
#define N 5600
#endif

/* Edge weights 1..7; pairs whose index sum is a multiple of 7, 11 or 13 start as
 * "no edge" (999). */
static void init_array(int n, int path[N][N]) {
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++) {
      path[i][j] = i * j % 7 + 1;
      if ((i + j) % 13 == 0 || (i + j) % 7 == 0 || (i + j) % 11 == 0)
        path[i][j] = 999;
    }
}

static void kernel_floyd_warshall(int n, int path[N][N]) {
  for (int k = 0; k < n; k++)
    for (int i = 0; i < n; i++)
      for (int j = 0; j < n; j++)
        path[i][j] = path[i][j] < path[i][k] + path[k][j] ? path[i][j]
                                                          : path[i][k] + path[k][j];
}

int main(void) {
  int n = N;
  int (*path)[N] = (int (*)[N])BENCH_ALLOC(int, N * N);

  do {
    init_array(n, path);
    bench_timer_start();
    kernel_floyd_warshall(n, path);
    bench_timer_stop();
  } while (bench_again());
  bench_timer_print();

  bench_dump_int("path", &path[0][0], (long)N * N);

  free(path);
  return 0;
}
