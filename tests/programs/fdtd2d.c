// polyflow: compiled=init_fdtd,kernel_fdtd_2d
/* PolyBench fdtd-2d: three coupled fields with different update extents and a 1-D source
   indexed by the time step. */
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

void init_fdtd(int tmax, int nx, int ny, double ex[nx][ny], double ey[nx][ny], double hz[nx][ny],
               double fict[tmax]) {
  for (int i = 0; i < tmax; i++)
    fict[i] = (double)i;
  for (int i = 0; i < nx; i++)
    for (int j = 0; j < ny; j++) {
      ex[i][j] = ((double)i * (j + 1)) / nx;
      ey[i][j] = ((double)i * (j + 2)) / ny;
      hz[i][j] = ((double)i * (j + 3)) / nx;
    }
}

void kernel_fdtd_2d(int tmax, int nx, int ny, double ex[nx][ny], double ey[nx][ny],
                    double hz[nx][ny], double fict[tmax]) {
  for (int t = 0; t < tmax; t++) {
    for (int j = 0; j < ny; j++)
      ey[0][j] = fict[t];
    for (int i = 1; i < nx; i++)
      for (int j = 0; j < ny; j++)
        ey[i][j] = ey[i][j] - 0.5 * (hz[i][j] - hz[i - 1][j]);
    for (int i = 0; i < nx; i++)
      for (int j = 1; j < ny; j++)
        ex[i][j] = ex[i][j] - 0.5 * (hz[i][j] - hz[i][j - 1]);
    for (int i = 0; i < nx - 1; i++)
      for (int j = 0; j < ny - 1; j++)
        hz[i][j] = hz[i][j] - 0.7 * (ex[i][j + 1] - ex[i][j] + ey[i + 1][j] - ey[i][j]);
  }
}

int main(void) {
  int tmax = 20, nx = 40, ny = 50;
  double (*ex)[ny] = malloc(sizeof(double) * nx * ny);
  double (*ey)[ny] = malloc(sizeof(double) * nx * ny);
  double (*hz)[ny] = malloc(sizeof(double) * nx * ny);
  double *fict = malloc(sizeof(double) * tmax);
  init_fdtd(tmax, nx, ny, ex, ey, hz, fict);
  kernel_fdtd_2d(tmax, nx, ny, ex, ey, hz, fict);
  REPORT_D("ex", &ex[0][0], nx * ny);
  REPORT_D("ey", &ey[0][0], nx * ny);
  REPORT_D("hz", &hz[0][0], nx * ny);
  printf("hz[0][0]=%.15g hz[20][30]=%.15g ey[39][49]=%.15g\n", hz[0][0], hz[20][30],
         ey[nx - 1][ny - 1]);
  free(ex);
  free(ey);
  free(hz);
  free(fict);
  return 0;
}
