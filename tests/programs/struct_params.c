// polyflow: compiled=vec_scale,vec_add,mat_trace_prod,vec_sum_checked,vec_bump,series_e,accumulate_into,checked_sum_e,cheb_eval,vec_len_or,perm_fill,vec_len_after_call,scale_field_into,count_with_bumps,mat_mul,sum_or_error
// polyflow: fallback=vec_isnull,copy_bytes,count_flags
// Struct pointer parameters (GSL's vectors and matrices, its gsl_sf_result out-parameters):
// fields become parameters, passed by value where nothing can change them before the function
// reads them, else by address (written fields and fields of their type, a conditional first
// dereference, a field read after a call, a store that may alias a field). Where a pointer
// field would have to be passed by address, or the pointer itself is used, the function stays
// with cc.
#include <math.h>
#include <stdio.h>
#include <stddef.h>
typedef struct { size_t size; size_t stride; double *data; int owner; } vec;
typedef struct mat_s { size_t size1, size2, tda; double *data; } mat;
struct perm { size_t size; size_t *data; };
void report(const char *reason, const char *file, int line, int code) {
  printf("error: %s (%s:%d) %d\n", reason, file, line, code);
}
#define REPORT(reason, code) do { report(reason, __FILE__, __LINE__, code); return code; } while (0)
int vec_scale(vec *a, const double x) {
  const size_t N = a->size;
  const size_t stride = a->stride;
  size_t i;
  for (i = 0; i < N; i++) a->data[i * stride] *= x;
  return 0;
}
int vec_add(vec *a, const vec *b) {
  const size_t N = a->size;
  if (b->size != N) {
    REPORT("vectors must have the \"same\" length\t!", 19);
  } else {
    const size_t sa = a->stride, sb = b->stride;
    size_t i;
    for (i = 0; i < N; i++) a->data[i * sa] += b->data[i * sb];
    return 0;
  }
}
double vec_sum_checked(const vec *v, int limit) {
  double s = 0;
  size_t i;
  if (v->size > (size_t)limit) REPORT("too long", -1);
  for (i = 0; i < v->size; i++) s += v->data[i * v->stride];
  return s;
}
double mat_trace_prod(const mat *m, const mat *n) {
  double s = 0;
  size_t i, j;
  if (m->size1 != n->size2) return -1;
  for (i = 0; i < m->size1; i++)
    for (j = 0; j < m->size2; j++)
      s += m->data[i * m->tda + j] * n->data[j * n->tda + i];
  return s;
}
void mat_mul(mat *c, const mat *a, const mat *b) {  // b is first read inside the loops
  size_t i, j, k;
  size_t M = c->size1, N = c->size2, K = a->size2;
  for (i = 0; i < M; i++)
    for (j = 0; j < N; j++) {
      double t = 0;
      for (k = 0; k < K; k++) t += a->data[i * a->tda + k] * b->data[k * b->tda + j];
      c->data[i * c->tda + j] = t;
    }
}
int vec_isnull(const vec *v) { if (v == 0) return 1; return v->size == 0; }
size_t vec_len_or(const vec *v, int n) {
  size_t s = 0;
  if (n > 0) s = v->size;
  for (int i = 0; i < n; i++) s += i;
  return s;
}
void perm_fill(struct perm *p) {  // a store to p->data[i] (size_t) may change p->size
  size_t n = p->size;
  for (size_t i = 0; i < n; i++) p->data[i] = p->size - i;
}
void vec_bump(vec *v, int n) {  // writes a field
  size_t s = v->stride;
  for (int i = 0; i < n; i++) v->size += s;
}
typedef struct { double val; double err; } result_t;
int series_e(double x, int n, result_t *result) {  // GSL's special functions: out-parameters
  double sum = 0, term = 1;
  for (int k = 1; k <= n; k++) {
    term *= x / k;
    sum += term;
  }
  result->val = sum;
  result->err = 2.0 * 2.2e-16 * fabs(result->val) * n;
  return 0;
}
void accumulate_into(result_t *a, const result_t *b, int n) {  // a and b may be one struct
  for (int i = 0; i < n; i++) {
    a->val = b->val + 1.0;
    a->err += b->err * 0.5 + a->val;
  }
}
int checked_sum_e(const double *x, int n, result_t *result) {  // a call on the error path
  if (n < 0) {
    result->val = 0;
    result->err = 0;
    REPORT("negative length", 4);
  }
  double s = 0;
  for (int i = 0; i < n; i++) s += x[i];
  result->val = s;
  result->err = n * 1e-16;
  return 0;
}
size_t vec_len_after_call(const vec *v, int n) {  // v->size read by value after a call
  size_t s = v->stride;
  for (int i = 0; i < n; i++) s += i;
  if (n > 5) report("long", __FILE__, __LINE__, n);
  return s + v->size;
}
typedef struct { double *c; int order; double a, b; } cheb;
double cheb_eval(const cheb *cs, double x) {  // only reads its double array: cs->a stays
  double d = 0, dd = 0, y = (2 * x - cs->a - cs->b) / (cs->b - cs->a), y2 = 2 * y;
  for (int j = cs->order; j >= 1; j--) {
    double t = d;
    d = y2 * d - dd + cs->c[j];
    dd = t;
  }
  return y * d - dd + 0.5 * cs->c[0];
}
void scale_field_into(const cheb *cs, double *out, int n) {  // out may be &cs->a
  for (int i = 0; i < n; i++) out[0] = cs->a * (i + 2);
}
vec *current;
void bump_current(void) { current->size++; }
size_t count_with_bumps(const vec *v, int n) {  // the callee changes v->size each time
  size_t t = 0;
  for (int i = 0; i < n; i++) {
    t += v->size;
    bump_current();
  }
  return t + v->size;
}
typedef struct { size_t n; unsigned char *bytes; double *data; } buf;
void copy_bytes(buf *b) {  // a store through unsigned char * may change b->data
  for (size_t i = 0; i < b->n; i++) b->bytes[i] = (unsigned char)((long)b->data[i] & 255);
}
double sum_or_error(const vec *v, int n) {  // v is NULL on the error path
  if (n < 0) return -1.0;
  double s = 0;
  for (size_t i = 0; i < v->size; i++) s += v->data[i * v->stride];
  return s;
}
struct flags { unsigned ready : 1; unsigned count : 7; };
void count_flags(struct flags *f, int n) {  // bit-fields have no address to pass
  for (int i = 0; i < n; i++) f->count += f->ready;
}
static double d1[300], d2[300], ma[64 * 64], mb[64 * 64], mc[64 * 64];
int main(void) {
  for (int i = 0; i < 300; i++) { d1[i] = i; d2[i] = 300 - i; }
  vec a = {100, 3, d1, 0}, b = {100, 2, d2, 0}, c = {99, 1, d2, 0};
  vec_scale(&a, 1.5);
  vec_add(&a, &b);
  printf("%d\n", vec_add(&a, &c));
  double s = 0;
  for (int i = 0; i < 300; i++) s += d1[i];
  printf("%.3f %.3f %.3f\n", s, vec_sum_checked(&a, 200), vec_sum_checked(&a, 50));
  for (int i = 0; i < 64 * 64; i++) { ma[i] = i % 7; mb[i] = i % 5; }
  mat A = {60, 62, 64, ma}, B = {62, 60, 64, mb}, C = {60, 60, 64, mc};
  mat_mul(&C, &A, &B);
  printf("%.1f %.1f\n", mc[0], mc[59 * 64 + 59]);
  size_t pd[10];
  struct perm p = {10, pd};
  perm_fill(&p);
  vec_bump(&c, 3);
  printf("%.1f %d %zu %zu %zu %zu\n", mat_trace_prod(&A, &B), vec_isnull(&a), vec_len_or(0, 0),
         vec_len_or(&a, 3), pd[3], c.size);
  result_t r = {1.0, 0.25}, q = {2.0, 0.5};
  int code = series_e(0.5, 30, &r);
  printf("%d %.17g %.17g\n", code, r.val, r.err);
  accumulate_into(&r, &r, 4);  // the same struct twice: every read sees the store before it
  printf("%.17g %.17g\n", r.val, r.err);
  accumulate_into(&q, &r, 3);
  printf("%.17g %.17g\n", q.val, q.err);
  code = checked_sum_e(d1, 300, &q);
  printf("%d %.17g %.17g\n", code, q.val, q.err);
  code = checked_sum_e(d1, -1, &q);
  printf("%d %.17g %.17g\n", code, q.val, q.err);
  printf("%zu %zu\n", vec_len_after_call(&a, 3), vec_len_after_call(&a, 9));
  double coef[6] = {1.5, -0.25, 0.125, 0.0625, -0.03125, 0.015625};
  cheb cs = {coef, 5, -1.0, 2.0};
  printf("%.17g %.17g\n", cheb_eval(&cs, 0.3), cheb_eval(&cs, 1.7));
  scale_field_into(&cs, &cs.a, 2);  // each store changes cs.a before the next reads it
  printf("%.17g %.17g\n", cs.a, cs.b);
  current = &b;
  size_t counted = count_with_bumps(&b, 5);
  printf("%zu %zu\n", counted, b.size);
  unsigned char bytes[8];
  buf bb = {8, bytes, d1};
  copy_bytes(&bb);
  printf("%d %d\n", bytes[3], bytes[7]);
  printf("%.17g %.17g\n", sum_or_error(0, -1), sum_or_error(&a, 1));
  struct flags fl = {1, 3};
  count_flags(&fl, 9);
  printf("%u %u\n", fl.ready, fl.count);
  return 0;
}
