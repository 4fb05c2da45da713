// polyflow: compiled=apply_unary,apply_binary,softplus_norm,rounding,activations,lp_norm
/* Every math.h function of the supported list, on doubles, within each function's domain. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REPORT_D(label, arr, count)                                 \
  do {                                                              \
    double sum_ = 0.0;                                              \
    unsigned long hash_ = 14695981039346656037UL;                   \
    for (long k_ = 0; k_ < (long)(count); k_++) {                   \
      unsigned long bits_;                                          \
      memcpy(&bits_, &(arr)[k_], sizeof bits_);                     \
      sum_ += (arr)[k_];                                            \
      hash_ = (hash_ ^ bits_) * 1099511628211UL;                    \
    }                                                               \
    printf("%s: sum=%.15g hash=%lu\n", (label), sum_, hash_);       \
  } while (0)

/* one row of out per function: sqrt exp log fabs floor ceil sin cos tanh */
void apply_unary(int n, const double *restrict x, double out[9][n]) {
  for (int i = 0; i < n; i++) {
    double p = fabs(x[i]) + 0.5;
    out[0][i] = sqrt(p);
    out[1][i] = exp(x[i]);
    out[2][i] = log(p);
    out[3][i] = fabs(x[i]);
    out[4][i] = floor(x[i]);
    out[5][i] = ceil(x[i]);
    out[6][i] = sin(x[i]);
    out[7][i] = cos(x[i]);
    out[8][i] = tanh(x[i]);
  }
}

void apply_binary(int n, const double *restrict x, const double *restrict y,
                  double out[3][n]) {
  for (int i = 0; i < n; i++) {
    out[0][i] = pow(fabs(x[i]) + 0.25, y[i]);
    out[1][i] = fmin(x[i], y[i]);
    out[2][i] = fmax(x[i], y[i]);
  }
}

double softplus_norm(int n, const double *restrict x) {
  double s = 0.0;
  for (int i = 0; i < n; i++)
    s += log(1.0 + exp(x[i]));
  return sqrt(s);
}

/* rounding helpers built from floor/ceil, negative values included */
void rounding(int n, const double *restrict x, double *restrict rnd, int *restrict trunc_i) {
  for (int i = 0; i < n; i++) {
    rnd[i] = x[i] >= 0.0 ? floor(x[i] + 0.5) : ceil(x[i] - 0.5);
    trunc_i[i] = (int)(x[i] >= 0.0 ? floor(x[i]) : ceil(x[i]));
  }
}

void activations(int n, const double *restrict x, double *restrict gelu, double *restrict swish) {
  for (int i = 0; i < n; i++) {
    double v = x[i];
    gelu[i] = 0.5 * v * (1.0 + tanh(0.7978845608028654 * (v + 0.044715 * v * v * v)));
    swish[i] = v / (1.0 + exp(-v));
  }
}

double lp_norm(int n, const double *restrict x, double p) {
  double s = 0.0;
  for (int i = 0; i < n; i++)
    s += pow(fabs(x[i]), p);
  return pow(s, 1.0 / p);
}

int main(void) {
  int n = 97;
  double *x = malloc(sizeof(double) * n);
  double *y = malloc(sizeof(double) * n);
  double (*un)[n] = malloc(sizeof(double) * 9 * n);
  double (*bin)[n] = malloc(sizeof(double) * 3 * n);
  double *r1 = malloc(sizeof(double) * n);
  double *r2 = malloc(sizeof(double) * n);
  int *ti = malloc(sizeof(int) * n);
  for (int i = 0; i < n; i++) {
    x[i] = -6.0 + (double)i * 0.125 + (double)(i % 3) * 0.0078125;
    y[i] = (double)((i * 5) % 11) * 0.375 - 1.5;
  }

  apply_unary(n, x, un);
  const char *names[9] = {"sqrt", "exp", "log", "fabs", "floor", "ceil", "sin", "cos", "tanh"};
  for (int k = 0; k < 9; k++) {
    REPORT_D(names[k], un[k], n);
    printf("  %s(x[3])=%.15g %s(x[60])=%.15g\n", names[k], un[k][3], names[k], un[k][60]);
  }
  apply_binary(n, x, y, bin);
  REPORT_D("pow", bin[0], n);
  REPORT_D("fmin", bin[1], n);
  REPORT_D("fmax", bin[2], n);
  printf("softplus_norm=%.15g\n", softplus_norm(n, x));
  rounding(n, x, r1, ti);
  REPORT_D("round", r1, n);
  long ts = 0;
  for (int i = 0; i < n; i++)
    ts += ti[i] * (i + 1);
  printf("trunc weighted=%ld\n", ts);
  activations(n, x, r1, r2);
  REPORT_D("gelu", r1, n);
  REPORT_D("swish", r2, n);
  printf("lp_norm(3)=%.15g lp_norm(1.5)=%.15g\n", lp_norm(n, x, 3.0), lp_norm(n, y, 1.5));

  free(x);
  free(y);
  free(un);
  free(bin);
  free(r1);
  free(r2);
  free(ti);
  return 0;
}
