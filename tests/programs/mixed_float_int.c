// polyflow: compiled=float_accumulate,int_scaled_float,float_vs_double_sum,int_div_then_float,bucketize,float_int_compare,saxpy_int_index
/* float and int arithmetic mixed: promotion rules, float-precision accumulation, int division
   before conversion, float compared against ints. */
#include <stdio.h>
#include <stdlib.h>

/* float accumulation stays in float precision */
float float_accumulate(int n) {
  float s = 0.0f;
  for (int i = 0; i < n; i++)
    s += 0.1f;
  return s;
}

void int_scaled_float(int n, const int *restrict a, float *restrict out) {
  for (int i = 0; i < n; i++)
    out[i] = a[i] * 0.5f + i / 3 + (float)i / 3;
}

/* the same sum in float and in double differ; both are well defined */
double float_vs_double_sum(int n, const float *restrict x) {
  float fs = 0.0f;
  double ds = 0.0;
  for (int i = 0; i < n; i++) {
    fs += x[i] * x[i];
    ds += (double)x[i] * x[i];
  }
  return ds - fs;
}

void int_div_then_float(int n, const int *restrict a, double *restrict d, float *restrict f) {
  for (int i = 0; i < n; i++) {
    d[i] = a[i] / 4 * 1.5 + a[i] / 4.0;
    f[i] = (float)(a[i] % 5) / 2 + 0.25f * (a[i] / 3);
  }
}

/* float -> int bucket index, counted into an int histogram */
void bucketize(int n, const float *restrict x, float lo, float width, int nb, int *restrict h) {
  for (int b = 0; b < nb; b++)
    h[b] = 0;
  for (int i = 0; i < n; i++) {
    int b = (int)((x[i] - lo) / width);
    if (b < 0)
      b = 0;
    if (b >= nb)
      b = nb - 1;
    h[b]++;
  }
}

int float_int_compare(int n, const float *restrict x, const int *restrict a) {
  int c = 0;
  for (int i = 0; i < n; i++) {
    if (x[i] > a[i])
      c += 1;
    if (x[i] == a[i])
      c += 10;
    if ((int)x[i] == a[i])
      c += 100;
  }
  return c;
}

void saxpy_int_index(int n, float alpha, const float *restrict x, float *restrict y,
                     const int *restrict idx) {
  for (int i = 0; i < n; i++)
    y[idx[i]] += alpha * x[i] + (float)idx[i];
}

int main(void) {
  int n = 64;
  int *a = malloc(sizeof(int) * n);
  float *x = malloc(sizeof(float) * n);
  float *y = malloc(sizeof(float) * n);
  double *d = malloc(sizeof(double) * n);
  int *h = malloc(sizeof(int) * 10);
  int *idx = malloc(sizeof(int) * n);
  for (int i = 0; i < n; i++) {
    a[i] = (i * 29) % 47 - 20;
    x[i] = (float)((i * 11) % 17) * 0.3f - 1.0f;
    y[i] = 0.0f;
    idx[i] = (i * 5) % n;
  }

  printf("float_accumulate(10)=%.8g (1000)=%.8g\n", float_accumulate(10), float_accumulate(1000));
  int_scaled_float(n, a, y);
  for (int i = 0; i < n; i += 9)
    printf("y[%d]=%.8g\n", i, y[i]);
  printf("float_vs_double_sum=%.15g\n", float_vs_double_sum(n, x));
  int_div_then_float(n, a, d, y);
  for (int i = 0; i < 8; i++)
    printf("a=%d d=%.15g f=%.8g\n", a[i], d[i], y[i]);
  bucketize(n, x, -1.0f, 0.5f, 10, h);
  for (int b = 0; b < 10; b++)
    printf("%d ", h[b]);
  printf("\n");
  for (int i = 0; i < n; i++)
    x[i] = (float)a[i] + (float)(i % 3 - 1) * 0.5f;
  printf("float_int_compare=%d\n", float_int_compare(n, x, a));
  for (int i = 0; i < n; i++)
    y[i] = (float)i;
  saxpy_int_index(n, 0.75f, x, y, idx);
  double ys = 0.0;
  for (int i = 0; i < n; i++)
    ys += y[i] * (i + 1);
  printf("saxpy weighted=%.15g y[5]=%.8g\n", ys, y[5]);

  free(a);
  free(x);
  free(y);
  free(d);
  free(h);
  free(idx);
  return 0;
}
