// polyflow: compiled=apply_classes,scale_by_class,histogram_classes
// polyflow: fallback=classify,dispatch
/* A file where some functions must stay with the C compiler (switch) and the rest go through
   MLIR: a compiled kernel calls a fallback function and a fallback function calls compiled ones. */
#include <stdio.h>
#include <stdlib.h>

/* switch: not supported, left to the C compiler */
int classify(int v) {
  switch (v % 4) {
  case 0:
    return 10;
  case 1:
  case -1:
    return 20;
  case 2:
    return v > 50 ? 30 : 31;
  default:
    return 40;
  }
}

/* compiled, calls the fallback function classify */
void apply_classes(int n, const int *restrict a, int *restrict out) {
  for (int i = 0; i < n; i++)
    out[i] = classify(a[i]) + i % 3;
}

void scale_by_class(int n, const int *restrict cls, double *restrict x) {
  for (int i = 0; i < n; i++)
    x[i] = x[i] * (double)(cls[i] / 10) + (cls[i] % 10 == 1 ? 0.5 : 0.0);
}

void histogram_classes(int n, const int *restrict cls, int *restrict h) {
  for (int k = 0; k < 5; k++)
    h[k] = 0;
  for (int i = 0; i < n; i++)
    h[cls[i] / 10]++;
}

/* switch again: chooses which compiled kernel to run */
double dispatch(int op, int n, const int *restrict a, int *restrict cls, double *restrict x,
                int *restrict h) {
  double r = 0.0;
  switch (op) {
  case 0:
    apply_classes(n, a, cls);
    break;
  case 1:
    scale_by_class(n, cls, x);
    for (int i = 0; i < n; i++)
      r += x[i];
    break;
  case 2:
    histogram_classes(n, cls, h);
    r = h[1] + 2 * h[2] + 3 * h[3] + 4 * h[4];
    break;
  default:
    r = -1.0;
  }
  return r;
}

int main(void) {
  int n = 77;
  int *a = malloc(sizeof(int) * n);
  int *cls = malloc(sizeof(int) * n);
  double *x = malloc(sizeof(double) * n);
  int *h = malloc(sizeof(int) * 5);
  for (int i = 0; i < n; i++) {
    a[i] = (i * 41) % 101 - 20;
    x[i] = (double)(i % 9) * 0.25;
  }
  for (int op = 0; op < 4; op++)
    printf("dispatch(%d)=%.15g\n", op, dispatch(op, n, a, cls, x, h));
  for (int i = 0; i < n; i += 6)
    printf("cls[%d]=%d x=%.15g\n", i, cls[i], x[i]);
  for (int k = 0; k < 5; k++)
    printf("h[%d]=%d\n", k, h[k]);
  free(a);
  free(cls);
  free(x);
  free(h);
  return 0;
}
