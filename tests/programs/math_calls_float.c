// polyflow: compiled=apply_unary_f,apply_binary_f,logsumexp_f,rounding_f,sigmoid_tanh_f,polar_f
/* Every float (f-suffixed) math.h function of the supported list, in float arithmetic. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REPORT_F(label, arr, count)                                 \
  do {                                                              \
    double sum_ = 0.0;                                              \
    unsigned int hash_ = 2166136261U;                               \
    for (long k_ = 0; k_ < (long)(count); k_++) {                   \
      unsigned int bits_;                                           \
      memcpy(&bits_, &(arr)[k_], sizeof bits_);                     \
      sum_ += (double)(arr)[k_];                                    \
      hash_ = (hash_ ^ bits_) * 16777619U;                          \
    }                                                               \
    printf("%s: sum=%.8g hash=%u\n", (label), sum_, hash_);         \
  } while (0)

/* one row of out per function: sqrtf expf logf fabsf floorf ceilf sinf cosf tanhf */
void apply_unary_f(int n, const float *restrict x, float out[9][n]) {
  for (int i = 0; i < n; i++) {
    float p = fabsf(x[i]) + 0.5f;
    out[0][i] = sqrtf(p);
    out[1][i] = expf(x[i]);
    out[2][i] = logf(p);
    out[3][i] = fabsf(x[i]);
    out[4][i] = floorf(x[i]);
    out[5][i] = ceilf(x[i]);
    out[6][i] = sinf(x[i]);
    out[7][i] = cosf(x[i]);
    out[8][i] = tanhf(x[i]);
  }
}

void apply_binary_f(int n, const float *restrict x, const float *restrict y, float out[3][n]) {
  for (int i = 0; i < n; i++) {
    out[0][i] = powf(fabsf(x[i]) + 0.25f, y[i]);
    out[1][i] = fminf(x[i], y[i]);
    out[2][i] = fmaxf(x[i], y[i]);
  }
}

float logsumexp_f(int n, const float *restrict x) {
  float m = x[0];
  for (int i = 1; i < n; i++)
    m = fmaxf(m, x[i]);
  float s = 0.0f;
  for (int i = 0; i < n; i++)
    s += expf(x[i] - m);
  return m + logf(s);
}

void rounding_f(int n, const float *restrict x, float *restrict r) {
  for (int i = 0; i < n; i++)
    r[i] = x[i] >= 0.0f ? floorf(x[i] + 0.5f) : ceilf(x[i] - 0.5f);
}

void sigmoid_tanh_f(int n, const float *restrict x, float *restrict sig, float *restrict th) {
  for (int i = 0; i < n; i++) {
    sig[i] = 1.0f / (1.0f + expf(-x[i]));
    th[i] = 2.0f * sig[i] - 1.0f - tanhf(0.5f * x[i]);
  }
}

/* polar to cartesian and back, all in float */
void polar_f(int n, const float *restrict r, const float *restrict t, float *restrict cx,
             float *restrict cy, float *restrict back) {
  for (int i = 0; i < n; i++) {
    cx[i] = r[i] * cosf(t[i]);
    cy[i] = r[i] * sinf(t[i]);
    back[i] = sqrtf(cx[i] * cx[i] + cy[i] * cy[i]) - r[i];
  }
}

int main(void) {
  int n = 97;
  float *x = malloc(sizeof(float) * n);
  float *y = malloc(sizeof(float) * n);
  float (*un)[n] = malloc(sizeof(float) * 9 * n);
  float (*bin)[n] = malloc(sizeof(float) * 3 * n);
  float *a = malloc(sizeof(float) * n);
  float *b = malloc(sizeof(float) * n);
  float *c = malloc(sizeof(float) * n);
  for (int i = 0; i < n; i++) {
    x[i] = -6.0f + (float)i * 0.125f + (float)(i % 3) * 0.0078125f;
    y[i] = (float)((i * 5) % 11) * 0.375f - 1.5f;
  }

  apply_unary_f(n, x, un);
  const char *names[9] = {"sqrtf", "expf", "logf", "fabsf", "floorf", "ceilf",
                          "sinf", "cosf", "tanhf"};
  for (int k = 0; k < 9; k++) {
    REPORT_F(names[k], un[k], n);
    printf("  %s(x[3])=%.8g %s(x[60])=%.8g\n", names[k], un[k][3], names[k], un[k][60]);
  }
  apply_binary_f(n, x, y, bin);
  REPORT_F("powf", bin[0], n);
  REPORT_F("fminf", bin[1], n);
  REPORT_F("fmaxf", bin[2], n);
  printf("logsumexp_f=%.8g\n", logsumexp_f(n, x));
  rounding_f(n, x, a);
  REPORT_F("roundf", a, n);
  sigmoid_tanh_f(n, x, a, b);
  REPORT_F("sigmoid", a, n);
  REPORT_F("tanh identity residual", b, n);
  for (int i = 0; i < n; i++) {
    a[i] = 0.5f + (float)(i % 7);
    b[i] = -3.0f + (float)i * 0.0625f;
  }
  polar_f(n, a, b, x, y, c);
  REPORT_F("cx", x, n);
  REPORT_F("cy", y, n);
  REPORT_F("radius residual", c, n);

  free(x);
  free(y);
  free(un);
  free(bin);
  free(a);
  free(b);
  free(c);
  return 0;
}
