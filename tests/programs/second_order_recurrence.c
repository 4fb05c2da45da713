// polyflow: compiled=clenshaw,fibonacci_mod
// Loops that hand one carried value on to another (b2 = b1; b1 = b0): Clenshaw's recurrence
// for a Chebyshev series (as GSL's special functions evaluate it) and a Fibonacci sequence.
// At -O3 the scheduler must leave them as they are (it aborted in the demotion to memory).
#include <stdio.h>
double clenshaw(const double *c, int n, double x) {
  double b0 = 0, b1 = 0, b2 = 0;
  for (int k = n - 1; k >= 0; k--) {
    b2 = b1;
    b1 = b0;
    b0 = 2 * x * b1 - b2 + c[k];
  }
  return 0.5 * (b0 - b2);
}
long fibonacci_mod(int n, long m) {
  long a = 0, b = 1;
  for (int i = 0; i < n; i++) {
    long t = (a + b) % m;
    a = b;
    b = t;
  }
  return a;
}
int main(void) {
  double c[24];
  for (int k = 0; k < 24; k++) c[k] = 1.0 / (k + 1);
  for (int i = 0; i <= 4; i++) printf("%.15g\n", clenshaw(c, 24, -1 + 0.5 * i));
  printf("%ld\n", fibonacci_mod(90, 1000000007L));
  return 0;
}
