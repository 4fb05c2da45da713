// polyflow: compiled=set_basis,swap_columns,shifted_row,scale_rows,shadowed_offset,vec_swap
// polyflow: fallback=walk,pass_on,global_offset
/* Local pointers set once into an array (GSL's `ATOMIC * const data = v->data;`): their uses
   become subscripts of the array, at the offset they had where they were declared. A pointer
   that moves, is passed on, or points at a place that a call could move stays with cc. */
#include <stddef.h>
#include <stdio.h>
typedef struct { size_t size; size_t stride; double *data; } vec;

int set_basis(vec *v, size_t i) {
  double *const data = v->data;
  const size_t n = v->size, stride = v->stride;
  if (i >= n) return 1;
  for (size_t k = 0; k < n; k++) data[k * stride] = 0;
  *(double *)(data + i * stride) = 1;
  return 0;
}

void swap_columns(int n, int m, double *a, int i, int j) {
  double *c1 = a + i;
  double *c2 = &a[j];
  for (int p = 0; p < n; p++) {
    double t = c1[p * m];
    c1[p * m] = c2[p * m];
    c2[p * m] = t;
  }
}

void shifted_row(int n, double *a, int k) {
  double *row = a + k * n; /* k changes after: the offset is the one at the declaration */
  k = 0;
  for (int p = 0; p < n; p++) row[p] += k + 1;
}

void scale_rows(int n, int m, double *a) {
  for (int i = 0; i < n; i++) {
    double *row = a + i * m; /* declared again in each iteration */
    for (int j = 0; j < m; j++) row[j] *= i + 2;
    *row = -1;
  }
}

void shadowed_offset(int n, double *a, int k) {
  double *d = a + k;
  for (int i = 0; i < n; i++) {
    int k = i * 100; /* not the k of d's offset */
    d[i] = k;
  }
}

int vec_swap(vec *v, vec *w) {
  double *d1 = v->data, *d2 = w->data;
  const size_t size = v->size, s1 = v->stride, s2 = w->stride;
  if (v->size != w->size) return 1;
  for (size_t i = 0; i < size; i++) {
    double tmp = d1[i * s1];
    d1[i * s1] = d2[i * s2];
    d2[i * s2] = tmp;
  }
  return 0;
}

double walk(int n, const double *a) {
  double s = 0;
  const double *p = a;
  for (int i = 0; i < n; i++) s += *p++;
  return s;
}

void fill(double *x, int n) {
  for (int i = 0; i < n; i++) x[i] = i * 0.5;
}

void pass_on(int n, double *a) {
  double *half = a + n / 2;
  fill(half, n / 2);
  for (int i = 0; i < n / 2; i++) half[i] += 1;
}

double table[32];
int base;
double global_offset(int n) {
  double *t = table + base; /* base is a global: the offset is not written into each use */
  double s = 0;
  for (int i = 0; i < n; i++) s += t[i];
  return s;
}

static void show(const char *label, const double *x, int n) {
  printf("%s:", label);
  for (int i = 0; i < n; i++) printf(" %g", x[i]);
  printf("\n");
}

int main(void) {
  double d[12], e[12], a[24];
  for (int i = 0; i < 12; i++) { d[i] = 7; e[i] = i; }
  vec v = {6, 2, d}, w = {6, 2, e}, u = {5, 2, e};
  printf("%d %d\n", set_basis(&v, 4), set_basis(&v, 6));
  show("basis", d, 12);
  printf("%d %d\n", vec_swap(&v, &w), vec_swap(&v, &u));
  show("swapped", d, 12);
  show("swapped", e, 12);
  for (int i = 0; i < 24; i++) a[i] = i;
  swap_columns(6, 4, a, 1, 3);
  show("columns", a, 24);
  shifted_row(4, a, 2);
  scale_rows(4, 6, a);
  show("rows", a, 24);
  shadowed_offset(5, a, 3);
  show("shadowed", a, 24);
  printf("%g\n", walk(24, a));
  pass_on(10, a);
  show("passed", a, 24);
  for (int i = 0; i < 32; i++) table[i] = i * i;
  base = 5;
  printf("%g\n", global_offset(10));
  return 0;
}
