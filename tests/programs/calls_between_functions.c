// polyflow: compiled=sq,dot,axpy,norm2,normalize,wrap_index,rotate_gather,limit,count_below_limit,mean_of_rows,gram_diagonal,pipeline,to_char_class,char_classes
/* Kernels calling other functions of the file: scalar helpers, helpers taking whole arrays,
   calls in loop bounds and subscripts, chains of calls, various return types. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

double sq(double v) { return v * v; }

double dot(int n, const double *restrict a, const double *restrict b) {
  double s = 0.0;
  for (int i = 0; i < n; i++)
    s += a[i] * b[i];
  return s;
}

void axpy(int n, double alpha, const double *restrict x, double *restrict y) {
  for (int i = 0; i < n; i++)
    y[i] += alpha * x[i];
}

double norm2(int n, const double *restrict a) { return sqrt(dot(n, a, a)); }

void normalize(int n, double *restrict a) {
  double nrm = norm2(n, a);
  if (nrm == 0.0)
    return;
  for (int i = 0; i < n; i++)
    a[i] = a[i] / nrm;
}

int wrap_index(int i, int n) { return (i % n + n) % n; }

/* a call in the subscript */
void rotate_gather(int n, int shift, const int *restrict a, int *restrict out) {
  for (int i = 0; i < n; i++)
    out[i] = a[wrap_index(i + shift, n)];
}

int limit(int n) { return n / 2 + 1; }

/* a call in the loop bound */
int count_below_limit(int n, const int *restrict a) {
  int c = 0;
  for (int i = 0; i < limit(n); i++)
    if (a[i] < limit(n))
      c++;
  return c;
}

float mean_of_rows(int n, int m, float A[n][m], float *restrict means) {
  float total = 0.0f;
  for (int i = 0; i < n; i++) {
    float s = 0.0f;
    for (int j = 0; j < m; j++)
      s += A[i][j];
    means[i] = s / (float)m;
    total += means[i];
  }
  return total;
}

/* helper taking 2-D arrays whole */
void gram_diagonal(int n, int m, double A[n][m], double *restrict diag) {
  for (int i = 0; i < n; i++) {
    double s = 0.0;
    for (int j = 0; j < m; j++)
      s += sq(A[i][j]);
    diag[i] = s;
  }
}

/* a chain: pipeline -> normalize -> norm2 -> dot, axpy, gram_diagonal -> sq */
double pipeline(int n, double *restrict x, double *restrict y, double A[4][n], double *restrict d) {
  normalize(n, x);
  axpy(n, -dot(n, x, y), x, y);
  gram_diagonal(4, n, A, d);
  return dot(n, x, y) + norm2(n, y) + d[0] + d[3];
}

char to_char_class(int c) {
  if (c >= 48 && c <= 57)
    return 'd';
  if ((c >= 65 && c <= 90) || (c >= 97 && c <= 122))
    return 'a';
  return '.';
}

long char_classes(int n, const char *restrict s, char *restrict cls) {
  long code = 0;
  for (int i = 0; i < n; i++) {
    cls[i] = to_char_class(s[i]);
    code = code * 3 + (cls[i] == 'd' ? 1 : (cls[i] == 'a' ? 2 : 0));
    code %= 1000000007L;
  }
  return code;
}

int main(void) {
  int n = 40;
  double *x = malloc(sizeof(double) * n);
  double *y = malloc(sizeof(double) * n);
  double (*A)[n] = malloc(sizeof(double) * 4 * n);
  double *d = malloc(sizeof(double) * 4);
  int *a = malloc(sizeof(int) * n);
  int *out = malloc(sizeof(int) * n);
  float (*F)[7] = malloc(sizeof(float) * 5 * 7);
  float *means = malloc(sizeof(float) * 5);
  char *s = malloc(64);
  char *cls = malloc(64);
  for (int i = 0; i < n; i++) {
    x[i] = (double)(i % 7) - 2.5;
    y[i] = (double)((i * 3) % 5) * 0.5;
    a[i] = (i * 13) % 41;
    for (int k = 0; k < 4; k++)
      A[k][i] = (double)((i + k) % 6) * 0.25;
  }
  for (int i = 0; i < 35; i++)
    F[i / 7][i % 7] = (float)i * 0.1f;
  for (int i = 0; i < 63; i++)
    s[i] = (char)(32 + (i * 37) % 95);
  s[63] = 0;

  printf("dot=%.15g norm2=%.15g sq=%.15g\n", dot(n, x, y), norm2(n, x), sq(-1.5));
  printf("pipeline=%.15g\n", pipeline(n, x, y, A, d));
  printf("x[1]=%.15g y[2]=%.15g d=%.15g %.15g %.15g %.15g\n", x[1], y[2], d[0], d[1], d[2], d[3]);
  for (int sh = -45; sh <= 45; sh += 30) {
    rotate_gather(n, sh, a, out);
    printf("rotate %d: %d %d %d\n", sh, out[0], out[1], out[n - 1]);
  }
  printf("count_below_limit=%d limit=%d\n", count_below_limit(n, a), limit(n));
  float total = mean_of_rows(5, 7, F, means);
  printf("means total=%.8g: %.8g %.8g %.8g %.8g %.8g\n", total, means[0], means[1], means[2],
         means[3], means[4]);
  printf("char_classes=%ld\n", char_classes(63, s, cls));
  cls[63] = 0;
  printf("%s\n", cls);

  free(x);
  free(y);
  free(A);
  free(d);
  free(a);
  free(out);
  free(F);
  free(means);
  free(s);
  free(cls);
  return 0;
}
