// polyflow: compiled=get,set,vget,matmul,vsum,scale_both,sum_rows_or_none,counted_get,touch,row_norms
// polyflow: fallback=counted_sum,noisy_get,noisy_sum,sum_then_touch,mathieu_a,mathieu_b,pick,total_picked
/* Struct parameters passed on to small accessor functions of the same file (`get(a, i, k)`):
   the accessor's fields are passed instead, so the caller's loops stay affine. Accessors that
   call other functions, or change an integer field, keep their callers with cc; a parameter the
   function may never dereference (NULL when there is nothing to do) is read only where it is
   not NULL. */
#include <stdio.h>
#include <stdlib.h>

typedef struct { int rows, cols; double *data; } Mat;
typedef struct { unsigned long size, stride; double *data; } Vec;
typedef struct { int n; long count; double *x; } Counted;

double get(const Mat *m, int i, int j) { return m->data[i * m->cols + j]; }
void set(Mat *m, int i, int j, double v) { m->data[i * m->cols + j] = v; }
double vget(const Vec *v, unsigned long i) { return v->data[i * v->stride]; }

void matmul(const Mat *a, const Mat *b, Mat *c) {
  for (int i = 0; i < a->rows; i++)
    for (int j = 0; j < b->cols; j++) {
      double s = 0;
      for (int k = 0; k < a->cols; k++)
        s += get(a, i, k) * get(b, k, j);
      set(c, i, j, s);
    }
}

double vsum(const Vec *v) {
  double s = 0;
  for (unsigned long i = 0; i < v->size; i++)
    s += vget(v, i);
  return s;
}

/* b's fields are read only where b is not NULL: b is NULL when n is 0 */
void scale_both(int n, Mat *a, const Mat *b, double x) {
  for (int i = 0; i < n; i++)
    for (int j = 0; j < b->cols; j++)
      set(a, i, j, get(a, i, j) * x + get(b, i, j));
}

double sum_rows_or_none(const Mat *m, int rows) {
  if (rows <= 0)
    return -1;
  double s = 0;
  for (int i = 0; i < rows; i++)
    for (int j = 0; j < m->cols; j++)
      s += get(m, i, j);
  return s;
}

/* an accessor that counts its calls in the struct: its callers keep the struct (cc) */
double counted_get(Counted *c, int i) {
  c->count++;
  return c->x[i];
}
double counted_sum(Counted *c) {
  double s = 0;
  for (int i = 0; i < c->n; i++)
    s += counted_get(c, i);
  return s;
}

/* an accessor that prints: any call may change the struct, so its caller is cc's */
double noisy_get(const Vec *v, unsigned long i) {
  if (i == 2)
    printf("noisy %lu\n", i);
  return v->data[i];
}
double noisy_sum(const Vec *v) {
  double s = 0;
  for (unsigned long i = 0; i < v->size; i++)
    s += noisy_get(v, i);
  return s;
}

/* an accessor that writes an integer array could change an integer field read after it */
static long touched[4];
double touch(const Vec *v, long *where, unsigned long i) {
  where[i % 4] += 1;
  return v->data[i];
}
double sum_then_touch(const Vec *v) {
  double s = 0;
  for (unsigned long i = 0; i < v->size; i++)
    s += touch(v, touched, i);
  return s;
}

void row_norms(const Mat *m, double *out) {
  for (int i = 0; i < m->rows; i++) {
    double s = 0;
    for (int j = 0; j < m->cols; j++)
      s += get(m, i, j) * get(m, i, j);
    out[i] = s;
  }
}

/* functions that pass a struct parameter to each other (GSL's mathieu_a_e and mathieu_b_e):
   the forwarding must not chase them round, and they stay with cc */
typedef struct { double val, err; } Result;
int mathieu_a(int n, double q, Result *r);
int mathieu_b(int n, double q, Result *r) {
  if (n < 0)
    return mathieu_a(-n, q, r);
  double s = 0;
  for (int i = 0; i < n; i++)
    s += q * i;
  r->val = s;
  r->err = 0;
  return 0;
}
int mathieu_a(int n, double q, Result *r) {
  if (n < 0)
    return mathieu_b(-n, q, r);
  double s = 0;
  for (int i = 0; i < n; i++)
    s += q + i;
  r->val = s;
  r->err = 1;
  return 0;
}

/* an accessor polyflow cannot compile (a switch), which also reads its struct only after
   control flow (so not forwarded): its caller stays with cc too */
double pick(const Vec *v, unsigned long i) {
  switch (i & 1) {
  case 0:
    return v->data[i];
  default:
    return -v->data[i];
  }
}
double total_picked(const Vec *v) {
  double s = 0;
  for (unsigned long i = 0; i < v->size; i++)
    s += pick(v, i);
  return s;
}

int main(void) {
  Mat a = {5, 7, malloc(35 * sizeof(double))};
  Mat b = {7, 3, malloc(21 * sizeof(double))};
  Mat c = {5, 3, malloc(15 * sizeof(double))};
  for (int i = 0; i < 35; i++)
    a.data[i] = (i % 11) * 0.5 - 2;
  for (int i = 0; i < 21; i++)
    b.data[i] = 3 - (i % 4) * 0.75;
  matmul(&a, &b, &c);
  for (int i = 0; i < 15; i++)
    printf("%.17g ", c.data[i]);
  Vec v = {6, 5, a.data};
  printf("\n%.17g %.17g %.17g\n", vsum(&v), noisy_sum(&v), sum_then_touch(&v));
  printf("touched %ld %ld %ld %ld\n", touched[0], touched[1], touched[2], touched[3]);
  Mat sq = {5, 3, malloc(15 * sizeof(double))};
  for (int i = 0; i < 15; i++)
    sq.data[i] = i;
  scale_both(5, &sq, &c, 0.5);
  scale_both(0, &sq, NULL, 2.0);
  for (int i = 0; i < 15; i++)
    printf("%.17g ", sq.data[i]);
  printf("\n%.17g %.17g\n", sum_rows_or_none(&a, 4), sum_rows_or_none(NULL, 0));
  Counted cs = {9, 0, a.data};
  printf("%.17g %ld\n", counted_sum(&cs), cs.count);
  double norms[5];
  row_norms(&a, norms);
  for (int i = 0; i < 5; i++)
    printf("%.17g ", norms[i]);
  printf("\n");
  printf("%.17g\n", total_picked(&v));
  Result r;
  mathieu_a(-3, 2.0, &r);
  printf("%.17g %.17g\n", r.val, r.err);
  mathieu_b(-4, 1.5, &r);
  printf("%.17g %.17g\n", r.val, r.err);
  free(a.data);
  free(b.data);
  free(c.data);
  free(sq.data);
  return 0;
}
