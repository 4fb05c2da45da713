// polyflow: compiled=unary_double,binary_double,unary_float,binary_float,int_abs,classify_double,classify_float
/* Every math.h function polyflow compiles, each on arguments that matter for it (expm1 and
   log1p near 0, where exp(x) - 1 and log(1 + x) lose every digit), compared with gcc's results
   bit for bit: each output's bit pattern is printed. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N 12
#define UNARY 28
#define BINARY 6

static const double args[N] = {1e-300, -3e-17, 1e-10, 7.5e-9, -2.5e-6, 1e-3,
                               0.25,   -0.5,   0.75,  1.5,    -3.25,   20.0};

/* rows: sqrt exp exp2 expm1 log log2 log10 log1p fabs floor ceil round trunc sin cos tan asin
   acos atan sinh cosh tanh erf cbrt erfc asinh acosh atanh; arguments outside a function's domain are folded in */
void unary_double(int n, const double *restrict x, double out[UNARY][N]) {
  for (int i = 0; i < n; i++) {
    double v = x[i], p = fabs(v), u = v / 20.0;
    out[0][i] = sqrt(p);
    out[1][i] = exp(v);
    out[2][i] = exp2(v);
    out[3][i] = expm1(v);
    out[4][i] = log(p);
    out[5][i] = log2(p);
    out[6][i] = log10(p);
    out[7][i] = log1p(v > -1.0 ? v : p);
    out[8][i] = fabs(v);
    out[9][i] = floor(v);
    out[10][i] = ceil(v);
    out[11][i] = round(v);
    out[12][i] = trunc(v);
    out[13][i] = sin(v);
    out[14][i] = cos(v);
    out[15][i] = tan(v);
    out[16][i] = asin(u);
    out[17][i] = acos(u);
    out[18][i] = atan(v);
    out[19][i] = sinh(v);
    out[20][i] = cosh(v);
    out[21][i] = tanh(v);
    out[22][i] = erf(v);
    out[23][i] = cbrt(v);
    out[24][i] = erfc(v);
    out[25][i] = asinh(v);
    out[26][i] = acosh(1.0 + p);
    out[27][i] = atanh(u);
  }
}

/* rows: pow fmin fmax fmod atan2 copysign; y holds the arguments reversed */
void binary_double(int n, const double *restrict x, const double *restrict y,
                   double (*restrict out)[N]) {
  for (int i = 0; i < n; i++) {
    double a = x[i], b = y[i];
    out[0][i] = pow(fabs(a), b);
    out[1][i] = fmin(a, b);
    out[2][i] = fmax(a, b);
    out[3][i] = fmod(a, b);
    out[4][i] = atan2(a, b);
    out[5][i] = copysign(a, b);
  }
}

void unary_float(int n, const float *restrict x, float out[UNARY][N]) {
  for (int i = 0; i < n; i++) {
    float v = x[i], p = fabsf(v), u = v / 20.0f;
    out[0][i] = sqrtf(p);
    out[1][i] = expf(v);
    out[2][i] = exp2f(v);
    out[3][i] = expm1f(v);
    out[4][i] = logf(p);
    out[5][i] = log2f(p);
    out[6][i] = log10f(p);
    out[7][i] = log1pf(v > -1.0f ? v : p);
    out[8][i] = fabsf(v);
    out[9][i] = floorf(v);
    out[10][i] = ceilf(v);
    out[11][i] = roundf(v);
    out[12][i] = truncf(v);
    out[13][i] = sinf(v);
    out[14][i] = cosf(v);
    out[15][i] = tanf(v);
    out[16][i] = asinf(u);
    out[17][i] = acosf(u);
    out[18][i] = atanf(v);
    out[19][i] = sinhf(v);
    out[20][i] = coshf(v);
    out[21][i] = tanhf(v);
    out[22][i] = erff(v);
    out[23][i] = cbrtf(v);
    out[24][i] = erfcf(v);
    out[25][i] = asinhf(v);
    out[26][i] = acoshf(1.0f + p);
    out[27][i] = atanhf(u);
  }
}

void binary_float(int n, const float *restrict x, const float *restrict y,
                  float (*restrict out)[N]) {
  for (int i = 0; i < n; i++) {
    float a = x[i], b = y[i];
    out[0][i] = powf(fabsf(a), b);
    out[1][i] = fminf(a, b);
    out[2][i] = fmaxf(a, b);
    out[3][i] = fmodf(a, b);
    out[4][i] = atan2f(a, b);
    out[5][i] = copysignf(a, b);
  }
}

void int_abs(int n, const int *restrict a, const long *restrict b, int *restrict ra,
             long *restrict rb, long *restrict rc) {
  for (int i = 0; i < n; i++) {
    ra[i] = abs(a[i]);
    rb[i] = labs(b[i]);
    rc[i] = llabs(b[i]);
  }
}

/* the classification macros: glibc's isinf is -1 for -inf */
void classify_double(int n, const double *restrict x, int *restrict out) {
  for (int i = 0; i < n; i++)
    out[i] = isnan(x[i]) + 10 * isinf(x[i]) + 100 * isfinite(x[i]) + 1000 * (isinf(x[i]) != 0);
}

void classify_float(int n, const float *restrict x, int *restrict out) {
  for (int i = 0; i < n; i++)
    out[i] = isnan(x[i]) + 10 * isinf(x[i]) + 100 * isfinite(x[i]);
}

static void print_double_rows(const char *kind, int rows, double out[][N]) {
  for (int r = 0; r < rows; r++) {
    printf("%s %2d:", kind, r);
    for (int i = 0; i < N; i++) {
      unsigned long bits;
      memcpy(&bits, &out[r][i], sizeof bits);
      printf(" %016lx", bits);
    }
    printf("\n");
  }
}

static void print_float_rows(const char *kind, int rows, float out[][N]) {
  for (int r = 0; r < rows; r++) {
    printf("%s %2d:", kind, r);
    for (int i = 0; i < N; i++) {
      unsigned int bits;
      memcpy(&bits, &out[r][i], sizeof bits);
      printf(" %08x", bits);
    }
    printf("\n");
  }
}

double ud[UNARY][N], bd[BINARY][N];
double yd[N];
float xf[N], yf[N], uf[UNARY][N], bf[BINARY][N];

int main(void) {
  int ia[N], ra[N];
  long lb[N], rb[N], rc[N];
  for (int i = 0; i < N; i++) {
    xf[i] = (float)args[i];
    yd[i] = args[N - 1 - i];
    yf[i] = (float)yd[i];
    ia[i] = (i % 2 ? -1 : 1) * i * 1000003;
    lb[i] = (i % 3 ? -1L : 1L) * (long)i * 100000000007L;
  }
  unary_double(N, args, ud);
  binary_double(N, args, yd, bd);
  unary_float(N, xf, uf);
  binary_float(N, xf, yf, bf);
  int_abs(N, ia, lb, ra, rb, rc);
  print_double_rows("double unary", UNARY, ud);
  print_double_rows("double binary", BINARY, bd);
  print_float_rows("float unary", UNARY, uf);
  print_float_rows("float binary", BINARY, bf);
  for (int i = 0; i < N; i++)
    printf("abs %d %ld %ld\n", ra[i], rb[i], rc[i]);
  volatile double zero = 0.0;
  double special[6] = {zero / zero, 1.0 / zero, -1.0 / zero, -0.0, 1e308 * 10.0 * zero, 2.5};
  float specialf[6];
  int cd[6], cf[6];
  for (int i = 0; i < 6; i++) specialf[i] = (float)special[i];
  specialf[5] = 1e30f * 1e30f;  /* float overflow: inf in float, finite in double */
  classify_double(6, special, cd);
  classify_float(6, specialf, cf);
  for (int i = 0; i < 6; i++) printf("classify %d %d\n", cd[i], cf[i]);
  return 0;
}
