// polyflow: compiled=plain_reference
/* Everyday C outside the documented subset: typedefs, enum constants, <stdint.h> and size_t,
   bool, long long, const locals, initialized 2-D const globals, a static local, recursion,
   sizeof. Whether each function goes through MLIR or stays with the C compiler is polyflow's
   choice (only plain_reference must compile); the output must match gcc either way. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

typedef double real;
typedef int index_t;
enum { TAPS = 3, SHIFT = 2 };

static const int kernel3[3][3] = {{1, 2, 1}, {2, 4, 2}, {1, 2, 1}};
static const real third = 1.0 / 3.0;
static uint8_t lut[16];

long plain_reference(int n, const int *restrict a) {
  long s = 0;
  for (int i = 0; i < n; i++)
    s += a[i] * (i % 5);
  return s;
}

real typedef_kernel(index_t n, const real *restrict x) {
  real s = 0.0;
  for (index_t i = 0; i < n; i++)
    s += x[i] * third;
  return s;
}

int enum_constants(int n, const int *restrict a) {
  int s = 0;
  for (int i = 0; i + TAPS <= n; i++)
    for (int t = 0; t < TAPS; t++)
      s += (a[i + t] + 5) << SHIFT;
  return s;
}

uint32_t stdint_types(size_t n, const uint8_t *restrict b, int64_t *restrict acc) {
  uint32_t h = 2166136261u;
  int64_t s = 0;
  for (size_t i = 0; i < n; i++) {
    h = (h ^ b[i]) * 16777619u;
    s += (int16_t)(b[i] * 300);
  }
  acc[0] = s;
  return h;
}

int bool_flags(int n, const int *restrict a, bool *restrict flags) {
  int c = 0;
  for (int i = 0; i < n; i++) {
    flags[i] = a[i] % 3;
    c += flags[i] + (bool)(a[i] & 4) * 10;
  }
  return c;
}

long long long_long_math(int n) {
  long long s = 1LL;
  for (int i = 1; i <= n; i++)
    s = s * 3LL % 1000000000039LL + i;
  return s;
}

int const_locals(int n, const int *restrict a) {
  const int scale = 7;
  const int *const base = a;
  int s = 0;
  for (int i = 0; i < n; i++)
    s += base[i] * scale;
  return s;
}

int conv3x3(int n, int img[n][n], int out[n][n]) {
  int total = 0;
  for (int i = 1; i < n - 1; i++)
    for (int j = 1; j < n - 1; j++) {
      int s = 0;
      for (int di = 0; di < 3; di++)
        for (int dj = 0; dj < 3; dj++)
          s += kernel3[di][dj] * img[i + di - 1][j + dj - 1];
      out[i][j] = s / 16;
      total += out[i][j];
    }
  return total;
}

void fill_lut(void) {
  for (int i = 0; i < 16; i++)
    lut[i] = (uint8_t)(i * i * 17);
}

/* the static local keeps its value between calls */
int call_counter(int step) {
  static int calls = 0;
  calls += step;
  return calls;
}

int fib_recursive(int k) { return k < 2 ? k : fib_recursive(k - 1) + fib_recursive(k - 2); }

long sizeof_in_kernel(int n) {
  return (long)n * (long)sizeof(double) + (long)sizeof(int) * 100 + (long)sizeof(char) * 10000;
}

int main(void) {
  int n = 40;
  int *a = malloc(sizeof(int) * n);
  real *x = malloc(sizeof(real) * n);
  uint8_t *b = malloc(n);
  bool *flags = malloc(sizeof(bool) * n);
  int64_t *acc = malloc(sizeof(int64_t));
  int (*img)[12] = malloc(sizeof(int) * 12 * 12);
  int (*out)[12] = malloc(sizeof(int) * 12 * 12);
  for (int i = 0; i < n; i++) {
    a[i] = (i * 11) % 17 - 5;
    x[i] = (real)i * 0.5;
    b[i] = (uint8_t)(i * 29 + 3);
  }
  for (int i = 0; i < 144; i++)
    img[i / 12][i % 12] = (i * 37) % 100;

  printf("plain_reference=%ld\n", plain_reference(n, a));
  printf("typedef_kernel=%.15g\n", typedef_kernel(n, x));
  printf("enum_constants=%d\n", enum_constants(n, a));
  uint32_t h = stdint_types((size_t)n, b, acc);
  printf("stdint_types=%u acc=%ld\n", (unsigned)h, (long)acc[0]);
  int nflags = bool_flags(n, a, flags);
  printf("bool_flags=%d flags[1]=%d flags[2]=%d\n", nflags, (int)flags[1], (int)flags[2]);
  printf("long_long_math=%lld\n", long_long_math(60));
  printf("const_locals=%d\n", const_locals(n, a));
  int total = conv3x3(12, img, out);
  printf("conv3x3=%d out[5][5]=%d\n", total, out[5][5]);
  fill_lut();
  printf("lut: %u %u %u\n", (unsigned)lut[3], (unsigned)lut[9], (unsigned)lut[15]);
  int c1 = call_counter(2);
  int c2 = call_counter(3);
  int c3 = call_counter(5);
  printf("call_counter: %d %d %d\n", c1, c2, c3);
  printf("fib_recursive(20)=%d\n", fib_recursive(20));
  printf("sizeof_in_kernel=%ld\n", sizeof_in_kernel(3));

  free(a);
  free(x);
  free(b);
  free(flags);
  free(acc);
  free(img);
  free(out);
  return 0;
}
