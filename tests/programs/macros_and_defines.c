// polyflow: compiled=blur_macros,poly_eval,conditional_kernel
/* Preprocessor-heavy kernels: function-like macros for indexing and min/max, #if branches,
   constant tables in const file-scope arrays. */
#include <stdio.h>
#include <stdlib.h>

#define ROWS 20
#define COLS 24
#define IDX(i, j) ((i) * COLS + (j))
#define MIN(a, b) ((a) < (b) ? (a) : (b))
#define MAX(a, b) ((a) > (b) ? (a) : (b))
#define SQ(x) ((x) * (x))
#define USE_WIDE_STENCIL 1

static const double coeffs[5] = {0.5, -1.25, 0.75, 0.125, -0.0625};

void blur_macros(const double *restrict in, double *restrict out) {
  for (int i = 0; i < ROWS; i++)
    for (int j = 0; j < COLS; j++) {
      double s = 0.0;
      int cnt = 0;
      for (int di = MAX(i - 1, 0); di <= MIN(i + 1, ROWS - 1); di++)
        for (int dj = MAX(j - 1, 0); dj <= MIN(j + 1, COLS - 1); dj++) {
          s += in[IDX(di, dj)];
          cnt++;
        }
      out[IDX(i, j)] = s / cnt + SQ(in[IDX(i, j)]) * 0.01;
    }
}

/* Horner's rule with the const coefficient table */
void poly_eval(int n, const double *restrict x, double *restrict y) {
  for (int i = 0; i < n; i++) {
    double acc = coeffs[4];
    for (int k = 3; k >= 0; k--)
      acc = acc * x[i] + coeffs[k];
    y[i] = acc;
  }
}

void conditional_kernel(int n, double *restrict a) {
#if USE_WIDE_STENCIL
  for (int i = 2; i < n - 2; i++)
    a[i] = (a[i - 2] + a[i - 1] + a[i] + a[i + 1] + a[i + 2]) / 5.0;
#else
  for (int i = 1; i < n - 1; i++)
    a[i] = (a[i - 1] + a[i] + a[i + 1]) / 3.0;
#endif
}

int main(void) {
  double *in = malloc(sizeof(double) * ROWS * COLS);
  double *out = malloc(sizeof(double) * ROWS * COLS);
  double *y = malloc(sizeof(double) * 40);
  for (int i = 0; i < ROWS * COLS; i++)
    in[i] = (double)((i * 7) % 19) * 0.5 - 2.0;
  blur_macros(in, out);
  double s = 0.0;
  for (int i = 0; i < ROWS * COLS; i++)
    s += out[i] * (double)(i % 5 + 1);
  printf("blur weighted=%.15g out[0]=%.15g out[last]=%.15g\n", s, out[0], out[ROWS * COLS - 1]);
  poly_eval(40, in, y);
  for (int i = 0; i < 40; i += 8)
    printf("poly(%.15g)=%.15g\n", in[i], y[i]);
  conditional_kernel(40, y);
  s = 0.0;
  for (int i = 0; i < 40; i++)
    s += y[i];
  printf("conditional sum=%.15g y[20]=%.15g\n", s, y[20]);
  free(in);
  free(out);
  free(y);
  return 0;
}
