// polyflow: compiled=peak,lowest,circle,capped
// Constants of the real headers (<float.h>, <limits.h>, <stdint.h>, <math.h>) in compiled
// functions: the same values as cc sees.
#define _DEFAULT_SOURCE  /* M_PI under -std=c11 too */
#include <stdio.h>
#include <float.h>
#include <limits.h>
#include <stdint.h>
#include <math.h>
double peak(int n, double *a) {
  double m = -DBL_MAX;
  for (int i = 0; i < n; i++)
    if (a[i] > m) m = a[i];
  return m;
}
int lowest(int n, int *a) {
  int m = INT_MAX;
  for (int i = 0; i < n; i++)
    m = a[i] < m ? a[i] : m;
  return m;
}
double circle(int n, double *r) {
  double s = 0;
  for (int i = 0; i < n; i++) s += M_PI * r[i] * r[i];
  return s;
}
float capped(int n, float *a) {
  float m = -INFINITY;
  for (int i = 0; i < n; i++) m = a[i] > m ? a[i] : m;
  return m + (float)(SIZE_MAX > UINT32_MAX) + FLT_EPSILON;
}
int main(void) {
  double a[5] = {1, -3, 7.5, 2, 0}; int b[4] = {4, -9, 3, 8}; float c[3] = {1.5f, -2, 0.25f};
  printf("%g %d %.10f %.9g\n", peak(5, a), lowest(4, b), circle(5, a), capped(3, c));
  return 0;
}
