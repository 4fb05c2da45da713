// polyflow: compiled=imin,imax,iclamp,dabs,dclamp,lerp,smoothstep,tone_map,quantize,clamp_grid,later_defined
/* Small non-recursive helpers: static and static inline functions, prototypes, a function
   defined after main, helpers composed inside kernels called from main. */
#include <stdio.h>
#include <stdlib.h>

static inline int imin(int a, int b) { return a < b ? a : b; }
static inline int imax(int a, int b) { return a > b ? a : b; }
static int iclamp(int v, int lo, int hi) { return imin(imax(v, lo), hi); }

static double dabs(double v) { return v < 0.0 ? -v : v; }
static double dclamp(double v, double lo, double hi) {
  if (v < lo)
    return lo;
  if (v > hi)
    return hi;
  return v;
}

double lerp(double a, double b, double t) { return a + (b - a) * t; }

double smoothstep(double e0, double e1, double x) {
  double t = dclamp((x - e0) / (e1 - e0), 0.0, 1.0);
  return t * t * (3.0 - 2.0 * t);
}

long later_defined(int n, const int *restrict a);

/* composes the helpers; static, so only this file sees it */
static void tone_map(int n, const double *restrict in, double *restrict out) {
  for (int i = 0; i < n; i++) {
    double v = dabs(in[i]);
    out[i] = lerp(0.1, 0.9, smoothstep(0.0, 4.0, v)) + (in[i] < 0.0 ? -1.0 : 0.0);
  }
}

void quantize(int n, const double *restrict in, int levels, int *restrict q) {
  for (int i = 0; i < n; i++) {
    int v = (int)(in[i] * levels);
    q[i] = iclamp(v, -levels, levels);
  }
}

void clamp_grid(int n, int m, int A[n][m], int lo, int hi) {
  for (int i = 0; i < n; i++)
    for (int j = 0; j < m; j++)
      A[i][j] = iclamp(A[i][j] + imin(i, j) - imax(i - j, 0), lo, hi);
}

int main(void) {
  int n = 41, m = 9;
  double *in = malloc(sizeof(double) * n);
  double *out = malloc(sizeof(double) * n);
  int *q = malloc(sizeof(int) * n);
  int (*A)[m] = malloc(sizeof(int) * n * m);
  for (int i = 0; i < n; i++) {
    in[i] = (double)(i - 20) * 0.25;
    for (int j = 0; j < m; j++)
      A[i][j] = (i * 7 + j * 5) % 31 - 15;
  }

  tone_map(n, in, out);
  for (int i = 0; i < n; i += 4)
    printf("tone[%d]=%.15g\n", i, out[i]);
  quantize(n, out, 6, q);
  for (int i = 0; i < n; i++)
    printf("%d ", q[i]);
  printf("\n");
  clamp_grid(n, m, A, -10, 12);
  long s = 0;
  for (int i = 0; i < n; i++)
    for (int j = 0; j < m; j++)
      s += A[i][j] * (i + j + 1);
  printf("clamp_grid weighted=%ld A[0][8]=%d A[40][0]=%d\n", s, A[0][8], A[n - 1][0]);
  printf("later_defined=%ld\n", later_defined(n, q));
  printf("helpers: %d %d %d %.15g %.15g\n", imin(3, -4), imax(3, -4), iclamp(99, 0, 10),
         dabs(-2.5), smoothstep(1.0, 3.0, 2.5));

  free(in);
  free(out);
  free(q);
  free(A);
  return 0;
}

long later_defined(int n, const int *restrict a) {
  long s = 0;
  for (int i = 0; i < n; i++)
    s = (s * 7 + imax(a[i], 0) - imin(a[i], 0)) % 1000003;
  return s;
}
