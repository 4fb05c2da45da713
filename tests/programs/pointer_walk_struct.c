// polyflow: compiled=sum_indexed,centroid_arrays
// polyflow: fallback=sum_walk,centroid_struct,copy_walk
/* Reassigned pointers (p++) and structs are left to the C compiler; the same computations with
   indexing and separate arrays are compiled. */
#include <stdio.h>
#include <stdlib.h>

struct point {
  double x;
  double y;
};

long sum_walk(int n, const int *p) {
  long s = 0;
  while (n-- > 0)
    s += *p++;
  return s;
}

void copy_walk(int n, const double *src, double *dst) {
  const double *end = src + n;
  while (src < end)
    *dst++ = 2.0 * *src++;
}

long sum_indexed(int n, const int *restrict p) {
  long s = 0;
  for (int i = 0; i < n; i++)
    s += p[i];
  return s;
}

double centroid_struct(int n, const struct point *pts) {
  double cx = 0.0, cy = 0.0;
  for (int i = 0; i < n; i++) {
    cx += pts[i].x;
    cy += pts[i].y;
  }
  return cx / n + 10.0 * (cy / n);
}

double centroid_arrays(int n, const double *restrict xs, const double *restrict ys) {
  double cx = 0.0, cy = 0.0;
  for (int i = 0; i < n; i++) {
    cx += xs[i];
    cy += ys[i];
  }
  return cx / n + 10.0 * (cy / n);
}

int main(void) {
  int n = 55;
  int *a = malloc(sizeof(int) * n);
  double *xs = malloc(sizeof(double) * n);
  double *ys = malloc(sizeof(double) * n);
  double *dbl = malloc(sizeof(double) * n);
  struct point *pts = malloc(sizeof(struct point) * n);
  for (int i = 0; i < n; i++) {
    a[i] = (i * 19) % 23 - 11;
    xs[i] = (double)(i % 6) * 0.5;
    ys[i] = (double)((i * 5) % 8) * 0.125;
    pts[i].x = xs[i];
    pts[i].y = ys[i];
  }
  printf("sum_walk=%ld sum_indexed=%ld\n", sum_walk(n, a), sum_indexed(n, a));
  printf("centroid_struct=%.15g centroid_arrays=%.15g\n", centroid_struct(n, pts),
         centroid_arrays(n, xs, ys));
  copy_walk(n, xs, dbl);
  printf("copy_walk: %.15g %.15g %.15g\n", dbl[0], dbl[5], dbl[n - 1]);
  free(a);
  free(xs);
  free(ys);
  free(dbl);
  free(pts);
  return 0;
}
