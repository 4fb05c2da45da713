// polyflow: compiled=fill_grid,smooth_grid,build_histogram,weighted_sum,bump_counter,accumulate_scaled
/* Global and file-static arrays and scalars, some with initializers, shared between main and kernels. */
#include <stdio.h>
#include <stdlib.h>

#define G 16

double grid[G][G];
static double scratch[G][G];
static int hist[10];
int counter;
static long total = 7;
double scale = 0.5;
static float fscale = 1.5f;
static int weights[5] = {1, 2, 4, 2, 1};
double offsets[4] = {0.25, -0.5, 1.0, 2.0};

void fill_grid(int seed) {
  for (int i = 0; i < G; i++)
    for (int j = 0; j < G; j++)
      grid[i][j] = (double)((i * 5 + j * 3 + seed) % 17) * scale + offsets[(i + j) % 4];
}

/* reads grid, writes the static scratch, copies back */
void smooth_grid(void) {
  for (int i = 0; i < G; i++)
    for (int j = 0; j < G; j++)
      scratch[i][j] = grid[i][j];
  for (int i = 1; i < G - 1; i++)
    for (int j = 1; j < G - 1; j++)
      scratch[i][j] = 0.2 * (grid[i][j] + grid[i - 1][j] + grid[i + 1][j] + grid[i][j - 1] +
                             grid[i][j + 1]);
  for (int i = 0; i < G; i++)
    for (int j = 0; j < G; j++)
      grid[i][j] = scratch[i][j];
}

void build_histogram(int n, const int *restrict data) {
  for (int b = 0; b < 10; b++)
    hist[b] = 0;
  for (int i = 0; i < n; i++)
    hist[data[i] % 10] += 1;
}

/* a 5-tap filter with the static initialized weights */
long weighted_sum(int n, const int *restrict data) {
  long s = 0;
  for (int i = 2; i < n - 2; i++)
    for (int t = 0; t < 5; t++)
      s += (long)weights[t] * data[i + t - 2];
  total += s;
  return s;
}

void bump_counter(int k) {
  for (int i = 0; i < k; i++)
    counter++;
}

void accumulate_scaled(int n, float *restrict out) {
  for (int i = 0; i < n; i++)
    out[i] = out[i] * fscale + (float)counter;
  fscale = fscale * 0.5f;
}

int main(void) {
  int n = 500;
  int *data = malloc(sizeof(int) * n);
  float *out = malloc(sizeof(float) * 8);
  for (int i = 0; i < n; i++)
    data[i] = (i * 7919) % 1009;
  for (int i = 0; i < 8; i++)
    out[i] = (float)i * 0.25f;

  fill_grid(3);
  printf("grid[0][0]=%.15g grid[15][15]=%.15g\n", grid[0][0], grid[G - 1][G - 1]);
  scale = 0.25;
  offsets[2] = -3.0;
  fill_grid(5);
  smooth_grid();
  double gs = 0.0;
  for (int i = 0; i < G; i++)
    for (int j = 0; j < G; j++)
      gs += grid[i][j] * (double)(i + 1);
  printf("smoothed grid weighted=%.15g g[7][8]=%.15g scratch[1][1]=%.15g\n", gs, grid[7][8],
         scratch[1][1]);

  build_histogram(n, data);
  for (int b = 0; b < 10; b++)
    printf("hist[%d]=%d\n", b, hist[b]);

  printf("weighted_sum=%ld\n", weighted_sum(n, data));
  weights[2] = -1;
  long second = weighted_sum(n, data);
  printf("weighted_sum (modified weights)=%ld total=%ld\n", second, total);

  counter = 40;
  bump_counter(2);
  bump_counter(3);
  printf("counter=%d\n", counter);
  accumulate_scaled(8, out);
  accumulate_scaled(8, out);
  for (int i = 0; i < 8; i++)
    printf("out[%d]=%.8g\n", i, out[i]);
  printf("fscale=%.8g\n", fscale);

  free(data);
  free(out);
  return 0;
}
