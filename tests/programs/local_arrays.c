// polyflow: compiled=moving_window_max,tile_transpose_blocks,row_histograms,prefix_via_local,local_scalars_only,small_matrix_power,sized_by_initializer
/* Local (stack) arrays of fixed size: 1-D buffers, 2-D tiles, zeroed by loops before use. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define W 5
#define T 4

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

/* a ring buffer of the last W values held in a local array */
void moving_window_max(int n, const double *restrict x, double *restrict out) {
  double ring[W];
  for (int k = 0; k < W; k++)
    ring[k] = x[0];
  for (int i = 0; i < n; i++) {
    ring[i % W] = x[i];
    double m = ring[0];
    for (int k = 1; k < W; k++)
      m = ring[k] > m ? ring[k] : m;
    out[i] = m;
  }
}

/* transposes each T x T block through a local 2-D tile */
void tile_transpose_blocks(int n, double A[n][n]) {
  double tile[T][T];
  for (int bi = 0; bi + T <= n; bi += T)
    for (int bj = 0; bj + T <= n; bj += T) {
      for (int i = 0; i < T; i++)
        for (int j = 0; j < T; j++)
          tile[j][i] = A[bi + i][bj + j];
      for (int i = 0; i < T; i++)
        for (int j = 0; j < T; j++)
          A[bi + i][bj + j] = tile[i][j];
    }
}

/* per row: counts of the values 0..9 in a local histogram, reduced to (argmax, max) */
void row_histograms(int n, int m, int A[n][m], int out[n][2]) {
  for (int i = 0; i < n; i++) {
    int h[10];
    for (int b = 0; b < 10; b++)
      h[b] = 0;
    for (int j = 0; j < m; j++)
      h[A[i][j]] += 1;
    int best = 0;
    for (int b = 1; b < 10; b++)
      if (h[b] > h[best])
        best = b;
    out[i][0] = best;
    out[i][1] = h[best];
  }
}

long prefix_via_local(int n, const int *restrict a) {
  long pre[64];
  int len = n < 64 ? n : 64;
  pre[0] = a[0];
  for (int i = 1; i < len; i++)
    pre[i] = pre[i - 1] + a[i];
  long s = 0;
  for (int i = 0; i < len; i++)
    s += pre[i] * (i % 3);
  return s;
}

double local_scalars_only(int n, const double *restrict x) {
  double mean = 0.0, m2 = 0.0;
  int count = 0;
  for (int i = 0; i < n; i++) {
    count++;
    double delta = x[i] - mean;
    mean += delta / count;
    m2 += delta * (x[i] - mean);
  }
  return m2 / (count - 1);
}

/* M^p for a 3x3 integer matrix using two local matrices */
void small_matrix_power(int M[3][3], int p, int R[3][3]) {
  int acc[3][3];
  int tmp[3][3];
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 3; j++)
      acc[i][j] = i == j;
  for (int e = 0; e < p; e++) {
    for (int i = 0; i < 3; i++)
      for (int j = 0; j < 3; j++) {
        int s = 0;
        for (int k = 0; k < 3; k++)
          s += acc[i][k] * M[k][j];
        tmp[i][j] = s % 10007;
      }
    for (int i = 0; i < 3; i++)
      for (int j = 0; j < 3; j++)
        acc[i][j] = tmp[i][j];
  }
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 3; j++)
      R[i][j] = acc[i][j];
}

/* arrays sized by their initializers: braced rows (one of them empty), brace elision */
double sized_by_initializer(int n, const double *x) {
  const double w[] = {0.25, 0.5, 0.25};
  int tab[][3] = {{1, 2, 3}, {4, 5}, {}};
  int flat[][2] = {1, 2, 3};
  double s = 0;
  for (int i = 1; i < n - 1; i++)
    for (int k = 0; k < 3; k++)
      s += w[k] * x[i + k - 1] * tab[k][i % 3] + flat[k / 2][k % 2];
  return s + sizeof(w) + sizeof(tab) + sizeof(flat) / sizeof(flat[0]);
}

int main(void) {
  int n = 50, m = 23, b = 12;
  double *x = malloc(sizeof(double) * n);
  double *out = malloc(sizeof(double) * n);
  double (*A)[b] = malloc(sizeof(double) * b * b);
  int (*H)[m] = malloc(sizeof(int) * n * m);
  int (*HO)[2] = malloc(sizeof(int) * n * 2);
  int *iv = malloc(sizeof(int) * 100);
  int (*M)[3] = malloc(sizeof(int) * 9);
  int (*R)[3] = malloc(sizeof(int) * 9);
  for (int i = 0; i < n; i++) {
    x[i] = (double)((i * 17) % 29) * 0.5 - 3.0;
    for (int j = 0; j < m; j++)
      H[i][j] = (i * j + i + 2 * j) % 10;
  }
  for (int i = 0; i < b; i++)
    for (int j = 0; j < b; j++)
      A[i][j] = (double)(i * b + j);
  for (int i = 0; i < 100; i++)
    iv[i] = (i * 7) % 19 - 9;
  for (int i = 0; i < 9; i++)
    M[i / 3][i % 3] = (i * 5) % 7;

  moving_window_max(n, x, out);
  REPORT_D("moving_window_max", out, n);
  tile_transpose_blocks(b, A);
  REPORT_D("tile_transpose", &A[0][0], b * b);
  printf("A[0][1]=%g A[1][0]=%g A[5][6]=%g A[11][8]=%g\n", A[0][1], A[1][0], A[5][6], A[11][8]);
  row_histograms(n, m, H, HO);
  for (int i = 0; i < n; i += 7)
    printf("row %d: mode=%d count=%d\n", i, HO[i][0], HO[i][1]);
  printf("prefix_via_local=%ld %ld\n", prefix_via_local(100, iv), prefix_via_local(10, iv));
  printf("variance=%.15g\n", local_scalars_only(n, x));
  small_matrix_power(M, 13, R);
  for (int i = 0; i < 3; i++)
    printf("%d %d %d\n", R[i][0], R[i][1], R[i][2]);
  printf("sized_by_initializer=%.17g\n", sized_by_initializer(n, x));

  free(x);
  free(out);
  free(A);
  free(H);
  free(HO);
  free(iv);
  free(M);
  free(R);
  return 0;
}
