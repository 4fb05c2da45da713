/* Calls the gradient polyflow builds for energy() (energy.c) and checks it against central
   differences:
     polyflow build energy.c energy_main.c --grad energy -o energy && ./energy
   The prototype is what `polyflow build energy.c --grad energy --emit=header` writes. */
#include <math.h>
#include <stdio.h>

double energy(int n, int steps, double x[n], double w[n], double k);
void energy_grad(int n, int steps, const void *x, void *d_x, const void *w, void *d_w,
                 double k, void *d_k, double d_return);

enum { N = 64, STEPS = 10 };

static void start(double x[N], double w[N]) {
  for (int i = 0; i < N; i++) {
    x[i] = 0.3 + 0.1 * sin(1.0 + i);
    w[i] = 1.0 + 0.5 * cos(2.0 * i);
  }
}

int main(void) {
  double x[N], w[N], dx[N] = {0}, dw[N] = {0}, k = 0.7, dk = 0.0;
  start(x, w);
  energy_grad(N, STEPS, x, dx, w, dw, k, &dk, 1.0); /* seed 1: the gradient of the energy */
  double worst = 0.0, h = 1e-6;
  for (int i = 0; i < N; i++) {
    double up[N], down[N], wu[N], wd[N];
    start(up, wu);
    start(down, wd);
    up[i] += h;
    down[i] -= h;
    double numeric = (energy(N, STEPS, up, wu, k) - energy(N, STEPS, down, wd, k)) / (2 * h);
    double error = fabs(numeric - dx[i]) / fmax(1.0, fabs(numeric));
    worst = error > worst ? error : worst;
  }
  printf("dE/dk = %.9f, dE/dx[0..2] = %.9f %.9f %.9f\n", dk, dx[0], dx[1], dx[2]);
  printf("largest relative difference from central differences over x: %.1e\n", worst);
  return worst < 1e-6 ? 0 : 1;
}
