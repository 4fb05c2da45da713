/* durbin: Levinson-Durbin recursion solving the Yule-Walker system T y = -r, T the symmetric Toeplitz matrix of (1, r[0], ..., r[n-2]). */
#include "bench.h"

#if defined(MINI_DATASET)
#define N 40
#elif defined(SMALL_DATASET)
#define N 120
#elif defined(MEDIUM_DATASET)
#define N 400
#elif defined(LARGE_DATASET)
#define N 2000
#else
#define N 4000
#endif

/* r[k] = 1/(k+2): with the implicit lag-0 value 1 the sequence 1, 1/2, 1/3, ... is positive, decreasing and
 * convex, so every Toeplitz matrix T is positive definite and the recursion stays stable (|alpha| < 1). */
static void init_array(int n, DATA_TYPE r[N]) {
  for (int i = 0; i < n; i++) r[i] = (DATA_TYPE)1 / (i + 2);
}

static void kernel_durbin(int n, DATA_TYPE r[N], DATA_TYPE y[N], DATA_TYPE z[N]) {
  DATA_TYPE alpha, beta, sum;
  y[0] = -r[0];
  beta = 1.0;
  alpha = -r[0];
  for (int k = 1; k < n; k++) {
    beta = (1 - alpha * alpha) * beta;
    sum = 0.0;
    for (int i = 0; i < k; i++) sum += r[k - i - 1] * y[i];
    alpha = -(r[k] + sum) / beta;
    for (int i = 0; i < k; i++) z[i] = y[i] + alpha * y[k - i - 1];
    for (int i = 0; i < k; i++) y[i] = z[i];
    y[k] = alpha;
  }
}

int main(void) {
  DATA_TYPE *r = BENCH_ALLOC(DATA_TYPE, N);
  DATA_TYPE *y = BENCH_ALLOC(DATA_TYPE, N);
  DATA_TYPE *z = BENCH_ALLOC(DATA_TYPE, N);

  do {
    init_array(N, r);
    bench_timer_start();
    kernel_durbin(N, r, y, z);
    bench_timer_stop();
  } while (bench_again());
  bench_timer_print();

  bench_dump("y", y, N);

  free(r);
  free(y);
  free(z);
  return 0;
}
