// polyflow: compiled=scale,offset
// A parameter named like a file-scope variable (declared before or after the function) is the
// parameter: the function neither uses the global nor depends on its declaration (a function
// using `a` was left to cc because the global `a` is declared after it).
#include <stdio.h>

void scale(int n, double a[1000]) {
  for (int i = 0; i < n; i++)
    a[i] = 2 * a[i] + i;
}

double b[1000];

void offset(int n, double b[1000]) {
  for (int i = 0; i < n; i++)
    b[i] += 1.0;
}

static double a[1000];

int main(void) {
  static double local[1000];
  for (int i = 0; i < 1000; i++) {
    local[i] = i * 0.5;
    a[i] = -1.0;
    b[i] = 3.0;
  }
  scale(1000, local);
  offset(500, local);
  double sum = 0;
  for (int i = 0; i < 1000; i++)
    sum += local[i] + a[i] + b[i];
  printf("%.3f %.3f %.3f\n", sum, local[999], local[0]);
  return 0;
}
