// polyflow: compiled=weighted_sum,clamp_all
// Old-style (K&R) definitions, as zlib still writes some: parameters named in the declarator
// and declared before the body; a float parameter is passed promoted to double.
#include <stdio.h>
double weighted_sum(n, a, scale)
    int n;
    const double *a;
    float scale;
{
  double s = 0;
  int i;
  for (i = 0; i < n; i++) s += a[i] * scale;
  return s;
}
void clamp_all(a, n, hi) double *a; int n; double hi; {
  for (int i = 0; i < n; i++)
    if (a[i] > hi) a[i] = hi;
}
int main(void) {
  double a[64];
  for (int i = 0; i < 64; i++) a[i] = (i * 37 % 23) * 0.75;
  clamp_all(a, 64, 9.5);
  printf("%.4f\n", weighted_sum(64, a, 0.3f));
  return 0;
}
