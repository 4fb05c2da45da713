// polyflow: compiled=double_math_on_float_args,float_math_on_double_args,math_on_int_args,pow_and_sqrt_of_signed_zero
/* Which precision a math call uses is decided by the function, not by its argument: exp(float)
   converts to double and calls exp, expf(double) converts the argument to float first. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* results kept in float: each is (float)exp((double)x), which may differ from expf(x) */
void double_math_on_float_args(int n, const float *restrict x, float *restrict out) {
  for (int i = 0; i < n; i++) {
    float v = x[i];
    out[i * 6 + 0] = exp(v);
    out[i * 6 + 1] = sin(v);
    out[i * 6 + 2] = tanh(v);
    out[i * 6 + 3] = pow(v + 3.0f, v);
    out[i * 6 + 4] = log(v + 3.0f);
    out[i * 6 + 5] = cos(v);
  }
}

/* the double arguments are rounded to float before the float function runs */
void float_math_on_double_args(int n, const double *restrict x, double *restrict out) {
  for (int i = 0; i < n; i++) {
    out[i * 5 + 0] = expf(x[i]);
    out[i * 5 + 1] = sqrtf(x[i] + 3.0);
    out[i * 5 + 2] = floorf(x[i] * 1e8);
    out[i * 5 + 3] = fminf(x[i] * 1e-40, 0.0);
    out[i * 5 + 4] = fabsf(x[i]) - fabs(x[i]);
  }
}

double math_on_int_args(int n) {
  double s = 0.0;
  for (int i = 1; i <= n; i++)
    s += sqrt(i) + pow(2, i % 11) + log(i) + floor(i / 3) + fmax(i, n / 2);
  return s;
}

/* pow(-0.0, 0.5) is +0.0 but sqrt(-0.0) is -0.0 */
void pow_and_sqrt_of_signed_zero(const double *restrict z, double *restrict out) {
  out[0] = pow(z[0], 0.5);
  out[1] = sqrt(z[0]);
  out[2] = pow(z[1], 0.5);
  out[3] = sqrt(z[1]);
  out[4] = fabs(z[0]);
  out[5] = pow(z[0], 3.0);
}

int main(void) {
  int n = 24;
  float *x = malloc(sizeof(float) * n);
  float *fo = malloc(sizeof(float) * n * 6);
  double *d = malloc(sizeof(double) * n);
  double *dout = malloc(sizeof(double) * n * 5);
  double *z = malloc(sizeof(double) * 2);
  double *zo = malloc(sizeof(double) * 6);
  for (int i = 0; i < n; i++) {
    x[i] = (float)i * 0.2173913f - 2.3f;
    d[i] = (double)i * 0.2173913043478261 - 2.3;
  }

  double_math_on_float_args(n, x, fo);
  unsigned h = 2166136261U;
  for (int i = 0; i < n * 6; i++) {
    unsigned bits;
    memcpy(&bits, &fo[i], sizeof bits);
    h = (h ^ bits) * 16777619U;
  }
  printf("double math on float args: hash=%u fo[0..5]=%.8g %.8g %.8g %.8g %.8g %.8g\n", h, fo[0],
         fo[1], fo[2], fo[3], fo[4], fo[5]);
  float_math_on_double_args(n, d, dout);
  for (int i = 0; i < n; i += 5)
    printf("%.17g %.17g %.17g %.17g %.17g\n", dout[i * 5], dout[i * 5 + 1], dout[i * 5 + 2],
           dout[i * 5 + 3], dout[i * 5 + 4]);
  printf("math_on_int_args=%.15g\n", math_on_int_args(40));
  z[0] = -0.0;
  z[1] = 0.0;
  pow_and_sqrt_of_signed_zero(z, zo);
  printf("signed zeros: %g %g %g %g %g %g\n", zo[0], zo[1], zo[2], zo[3], zo[4], zo[5]);

  free(x);
  free(fo);
  free(d);
  free(dout);
  free(z);
  free(zo);
  return 0;
}
