/* polyflow's benchmark harness: dataset selection, kernel timing and output dumps.
 * Written for polyflow's PolyBench-style suite; every kernel file includes it.
 *
 * A kernel program:
 *   - selects its sizes with one of MINI_DATASET .. EXTRALARGE_DATASET (default LARGE_DATASET);
 *   - allocates its arrays with BENCH_ALLOC (heap, zeroed) and initializes them deterministically;
 *   - times only the kernel call, initialization included in a loop that repeats short kernels:
 *       do { init_array(...); bench_timer_start(); kernel_x(...); bench_timer_stop(); }
 *       while (bench_again());
 *   - prints the time with bench_timer_print() ("time: <seconds>" on stderr): the shortest
 *     call. A kernel of a few milliseconds is timed over repeated calls, each on freshly
 *     initialized arrays (so the output is one call's), until BENCH_REPEAT_SECONDS of kernel
 *     time or BENCH_MAX_REPEATS calls: one call of a millisecond is timed to +-30% on a busy
 *     machine. A kernel that takes longer than BENCH_REPEAT_SECONDS runs once.
 *   - dumps every output array with bench_dump() (on stdout, for validation).
 */
#ifndef POLYFLOW_BENCH_H
#define POLYFLOW_BENCH_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#if !defined(MINI_DATASET) && !defined(SMALL_DATASET) && !defined(MEDIUM_DATASET) && \
    !defined(LARGE_DATASET) && !defined(EXTRALARGE_DATASET)
#define LARGE_DATASET
#endif

#ifndef DATA_TYPE
#define DATA_TYPE double
#endif

/* Zeroed heap storage for `count` elements of `type`; exits on failure. */
#define BENCH_ALLOC(type, count) ((type *)bench_alloc((size_t)(count), sizeof(type)))

static inline void *bench_alloc(size_t count, size_t size) {
  void *p = calloc(count ? count : 1, size);
  if (!p) {
    fprintf(stderr, "bench: out of memory (%zu x %zu bytes)\n", count, size);
    exit(2);
  }
  return p;
}

#ifndef BENCH_REPEAT_SECONDS
#define BENCH_REPEAT_SECONDS 0.1
#endif
#ifndef BENCH_MAX_REPEATS
#define BENCH_MAX_REPEATS 25
#endif

static double bench_t0, bench_t1, bench_best = -1.0, bench_total = 0.0;
static int bench_calls = 0;

static inline double bench_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static inline void bench_timer_start(void) { bench_t0 = bench_now(); }
static inline void bench_timer_stop(void) {
  bench_t1 = bench_now();
  double elapsed = bench_t1 - bench_t0;
  if (bench_best < 0.0 || elapsed < bench_best) bench_best = elapsed;
  bench_total += elapsed;
  bench_calls++;
}
/* Whether to initialize and time the kernel once more (see the top of this file). */
static inline int bench_again(void) {
  return bench_calls < BENCH_MAX_REPEATS && bench_total < BENCH_REPEAT_SECONDS;
}
static inline void bench_timer_print(void) { fprintf(stderr, "time: %.6f\n", bench_best); }

/* Dump of an output array for validation, bounded in size whatever the dataset:
 *   "array <name> <count>", then "sum", "abs", "weighted" (index-weighted sum), then up to
 *   BENCH_DUMP_SAMPLES elements "<index> <value>" at a fixed stride covering the array. */
#ifndef BENCH_DUMP_SAMPLES
#define BENCH_DUMP_SAMPLES 2048
#endif

static inline void bench_dump(const char *name, const DATA_TYPE *data, long count) {
  double sum = 0.0, abs_sum = 0.0, weighted = 0.0;
  for (long i = 0; i < count; i++) {
    double v = (double)data[i];
    sum += v;
    abs_sum += fabs(v);
    weighted += v * (double)((i % 1021) + 1);
  }
  printf("array %s %ld\n", name, count);
  printf("sum %.17g\nabs %.17g\nweighted %.17g\n", sum, abs_sum, weighted);
  long stride = count > BENCH_DUMP_SAMPLES ? count / BENCH_DUMP_SAMPLES : 1;
  for (long i = 0; i < count; i += stride) printf("%ld %.17g\n", i, (double)data[i]);
}

/* The same for an integer array (nussinov's table, floyd-warshall when run on int). */
static inline void bench_dump_int(const char *name, const int *data, long count) {
  long sum = 0, abs_sum = 0, weighted = 0;
  for (long i = 0; i < count; i++) {
    sum += data[i];
    abs_sum += data[i] < 0 ? -data[i] : data[i];
    weighted += (long)data[i] * ((i % 1021) + 1);
  }
  printf("array %s %ld\n", name, count);
  printf("sum %ld\nabs %ld\nweighted %ld\n", sum, abs_sum, weighted);
  long stride = count > BENCH_DUMP_SAMPLES ? count / BENCH_DUMP_SAMPLES : 1;
  for (long i = 0; i < count; i += stride) printf("%ld %d\n", i, data[i]);
}

#endif
