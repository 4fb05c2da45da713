/* A relaxation that updates x in place for `steps` sweeps, then its weighted energy.
   `polyflow build energy.c --grad energy` also builds energy_grad (see energy_main.c). */
#include <math.h>

double energy(int n, int steps, double x[n], double w[n], double k) {
  for (int t = 0; t < steps; t++)
    for (int i = 1; i < n - 1; i++)
      x[i] = x[i] + k * w[i] * sin(x[i - 1] - 2.0 * x[i] + x[i + 1]);
  double e = 0.0;
  for (int i = 0; i < n; i++)
    e += x[i] * x[i] * w[i];
  return e;
}
