// polyflow: compiled=accumulate_rows,matvec_acc,scale_by_sum
/* Loops whose accumulation into memory the raising keeps in a register, called with overlapping
   arrays: the alias guard must pick the unraised copy (results differ if it does not), and
   disjoint calls must take the raised one. */
#include <stdio.h>

#define N 12

/* A[i] accumulates all of B: with A == B, B[k] for k == i is A[i] updated in this very loop */
void accumulate_rows(int n, double A[N], double B[N]) {
  for (int i = 0; i < n; i++)
    for (int k = 0; k < n; k++)
      A[i] += B[k];
}

/* y[i] += M[i][k] * x[k]: x overlapping y changes every later row */
void matvec_acc(int n, double M[N][N], double x[N], double y[N]) {
  for (int i = 0; i < n; i++)
    for (int k = 0; k < n; k++)
      y[i] = y[i] + M[i][k] * x[k];
}

/* s[0] gets the sum of v, then v is scaled by it: with s inside v the sum sees its own updates */
void scale_by_sum(int n, long v[N], long s[1]) {
  for (int k = 0; k < n; k++)
    s[0] += v[k];
  for (int k = 0; k < n; k++)
    v[k] = v[k] * 2 + s[0] % 7;
}

int main(void) {
  double X[N], Y[N], M[N][N];
  long L[N + 1], S[1] = {3};
  for (int i = 0; i < N; i++) {
    X[i] = Y[i] = 0.5 * i + 1;
    L[i] = 3 * i - 5;
    for (int k = 0; k < N; k++) M[i][k] = (i + 2 * k) % 5 - 1.5;
  }
  L[N] = 4;
  accumulate_rows(N, X, X);   /* overlapping */
  accumulate_rows(N, Y, X);   /* disjoint */
  matvec_acc(N, M, Y, Y);     /* overlapping */
  matvec_acc(N, M, X, Y);     /* disjoint */
  scale_by_sum(N, L, L + 4);  /* s inside v */
  scale_by_sum(N, L, S);      /* disjoint */
  for (int i = 0; i < N; i++) printf("%.17g %.17g %ld\n", X[i], Y[i], L[i]);
  printf("%ld %ld\n", L[N], S[0]);
  return 0;
}
