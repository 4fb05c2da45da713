/* nussinov: Nussinov's dynamic program for RNA folding, the maximum number of non-crossing complementary base pairs of every subsequence. */
#include "bench.h"

#if defined(MINI_DATASET)
#define N 60
#elif defined(SMALL_DATASET)
#define N 180
#elif defined(MEDIUM_DATASET)
#define N 500
#elif defined(LARGE_DATASET)
#define N 2500
#else /* EXTRALARGE_DATASET */
#define N 5500
#endif

/* Bases are coded 0..3; two bases pair when their codes sum to 3 (A-U, C-G). */
typedef char base;

static int match(int b1, int b2) { return b1 + b2 == 3 ? 1 : 0; }

static int max_score(int s1, int s2) { return s1 >= s2 ? s1 : s2; }

static void init_array(int n, base seq[N], int table[N][N]) {
  for (int i = 0; i < n; i++)
    seq[i] = (base)((i + 1) % 4);
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++)
      table[i][j] = 0;
}

static void kernel_nussinov(int n, base seq[N], int table[N][N]) {
  for (int i = n - 1; i >= 0; i--) {
    for (int j = i + 1; j < n; j++) {
      if (j - 1 >= 0)
        table[i][j] = max_score(table[i][j], table[i][j - 1]);
      if (i + 1 < n)
        table[i][j] = max_score(table[i][j], table[i + 1][j]);
      if (j - 1 >= 0 && i + 1 < n) {
        if (i < j - 1)
          table[i][j] = max_score(table[i][j], table[i + 1][j - 1] + match(seq[i], seq[j]));
        else
          table[i][j] = max_score(table[i][j], table[i + 1][j - 1]);
      }
      for (int k = i + 1; k < j; k++)
        table[i][j] = max_score(table[i][j], table[i][k] + table[k + 1][j]);
    }
  }
}

int main(void) {
  int n = N;
  base *seq = BENCH_ALLOC(base, N);
  int (*table)[N] = (int (*)[N])BENCH_ALLOC(int, N * N);

  do {
    init_array(n, seq, table);
    bench_timer_start();
    kernel_nussinov(n, seq, table);
    bench_timer_stop();
  } while (bench_again());
  bench_timer_print();

  bench_dump_int("table", &table[0][0], (long)N * N);

  free(seq);
  free(table);
  return 0;
}
