/* deriche: Deriche's recursive edge-detection filter, a causal plus anti-causal IIR pass along rows and then along columns of an image. */
#include "bench.h"

#if defined(MINI_DATASET)
#define W 64
#define H 64
#elif defined(SMALL_DATASET)
#define W 192
#define H 128
#elif defined(MEDIUM_DATASET)
#define W 720
#define H 480
#elif defined(LARGE_DATASET)
#define W 4096
#define H 2160
#else /* EXTRALARGE_DATASET */
#define W 7680
#define H 4320
#endif

static void init_array(int w, int h, DATA_TYPE *alpha, DATA_TYPE imgIn[W][H]) {
  *alpha = (DATA_TYPE)0.25;
  for (int i = 0; i < w; i++)
    for (int j = 0; j < h; j++)
      imgIn[i][j] = (DATA_TYPE)((313 * i + 991 * j) % 65536) / (DATA_TYPE)65535.0;
}

static void kernel_deriche(int w, int h, DATA_TYPE alpha, DATA_TYPE imgIn[W][H],
                           DATA_TYPE imgOut[W][H], DATA_TYPE y1[W][H], DATA_TYPE y2[W][H]) {
  /* Filter coefficients (the PolyBench 4.2 formulas). */
  DATA_TYPE ea = exp(-alpha);
  DATA_TYPE e2a = exp((DATA_TYPE)-2.0 * alpha);
  DATA_TYPE k = ((DATA_TYPE)1.0 - ea) * ((DATA_TYPE)1.0 - ea) /
                ((DATA_TYPE)1.0 + (DATA_TYPE)2.0 * alpha * ea - exp((DATA_TYPE)2.0 * alpha));
  DATA_TYPE a1 = k, a5 = k;
  DATA_TYPE a2 = k * ea * (alpha - (DATA_TYPE)1.0), a6 = a2;
  DATA_TYPE a3 = k * ea * (alpha + (DATA_TYPE)1.0), a7 = a3;
  DATA_TYPE a4 = -k * e2a, a8 = a4;
  DATA_TYPE b1 = pow((DATA_TYPE)2.0, -alpha);
  DATA_TYPE b2 = -e2a;
  DATA_TYPE c1 = (DATA_TYPE)1.0, c2 = (DATA_TYPE)1.0;

  /* Rows, left to right (causal). */
  for (int i = 0; i < w; i++) {
    DATA_TYPE ym1 = 0.0, ym2 = 0.0, xm1 = 0.0;
    for (int j = 0; j < h; j++) {
      y1[i][j] = a1 * imgIn[i][j] + a2 * xm1 + b1 * ym1 + b2 * ym2;
      xm1 = imgIn[i][j];
      ym2 = ym1;
      ym1 = y1[i][j];
    }
  }
  /* Rows, right to left (anti-causal). */
  for (int i = 0; i < w; i++) {
    DATA_TYPE yp1 = 0.0, yp2 = 0.0, xp1 = 0.0, xp2 = 0.0;
    for (int j = h - 1; j >= 0; j--) {
      y2[i][j] = a3 * xp1 + a4 * xp2 + b1 * yp1 + b2 * yp2;
      xp2 = xp1;
      xp1 = imgIn[i][j];
      yp2 = yp1;
      yp1 = y2[i][j];
    }
  }
  for (int i = 0; i < w; i++)
    for (int j = 0; j < h; j++)
      imgOut[i][j] = c1 * (y1[i][j] + y2[i][j]);

  /* Columns, top to bottom (causal). */
  for (int j = 0; j < h; j++) {
    DATA_TYPE tm1 = 0.0, ym1 = 0.0, ym2 = 0.0;
    for (int i = 0; i < w; i++) {
      y1[i][j] = a5 * imgOut[i][j] + a6 * tm1 + b1 * ym1 + b2 * ym2;
      tm1 = imgOut[i][j];
      ym2 = ym1;
      ym1 = y1[i][j];
    }
  }
  /* Columns, bottom to top (anti-causal). */
  for (int j = 0; j < h; j++) {
    DATA_TYPE tp1 = 0.0, tp2 = 0.0, yp1 = 0.0, yp2 = 0.0;
    for (int i = w - 1; i >= 0; i--) {
      y2[i][j] = a7 * tp1 + a8 * tp2 + b1 * yp1 + b2 * yp2;
      tp2 = tp1;
      tp1 = imgOut[i][j];
      yp2 = yp1;
      yp1 = y2[i][j];
    }
  }
  for (int i = 0; i < w; i++)
    for (int j = 0; j < h; j++)
      imgOut[i][j] = c2 * (y1[i][j] + y2[i][j]);
}

int main(void) {
  int w = W, h = H;
  DATA_TYPE alpha;
  DATA_TYPE (*imgIn)[H] = (DATA_TYPE (*)[H])BENCH_ALLOC(DATA_TYPE, W * H);
  DATA_TYPE (*imgOut)[H] = (DATA_TYPE (*)[H])BENCH_ALLOC(DATA_TYPE, W * H);
  DATA_TYPE (*y1)[H] = (DATA_TYPE (*)[H])BENCH_ALLOC(DATA_TYPE, W * H);
  DATA_TYPE (*y2)[H] = (DATA_TYPE (*)[H])BENCH_ALLOC(DATA_TYPE, W * H);

  do {
    init_array(w, h, &alpha, imgIn);
    bench_timer_start();
    kernel_deriche(w, h, alpha, imgIn, imgOut, y1, y2);
    bench_timer_stop();
  } while (bench_again());
  bench_timer_print();

  bench_dump("imgOut", &imgOut[0][0], (long)W * H);

  free(imgIn);
  free(imgOut);
  free(y1);
  free(y2);
  return 0;
}
