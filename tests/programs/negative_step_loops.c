// polyflow: compiled=reverse_copy,double_every_third_from_end,suffix_sums,back_substitute,countdown_pairs,halving_sum
/* Loops that count down: step -1, step -3, nested downward loops, a downward while. */
#include <stdio.h>
#include <stdlib.h>

void reverse_copy(int n, const double *restrict a, double *restrict b) {
  for (int i = n - 1; i >= 0; i--)
    b[n - 1 - i] = a[i];
}

void double_every_third_from_end(int n, double *restrict a) {
  for (int i = n - 1; i >= 0; i -= 3)
    a[i] = 2.0 * a[i] + 1.0;
}

void suffix_sums(int n, const long *restrict a, long *restrict s) {
  s[n - 1] = a[n - 1];
  for (int i = n - 2; i >= 0; --i)
    s[i] = s[i + 1] + a[i];
}

/* solves U x = b for an upper-triangular U */
void back_substitute(int n, double U[n][n], double b[n], double x[n]) {
  for (int i = n - 1; i >= 0; i--) {
    double acc = b[i];
    for (int j = i + 1; j < n; j++)
      acc -= U[i][j] * x[j];
    x[i] = acc / U[i][i];
  }
}

/* nested downward loops with a bound that depends on the outer index */
void countdown_pairs(int n, int out[n + 1][n + 1]) {
  for (int i = n; i > 0; i--)
    for (int j = i; j >= 1; j -= 2)
      out[i][j] = i * 10 + j;
}

int halving_sum(int k) {
  int s = 0;
  while (k > 0) {
    s += k;
    k /= 2;
  }
  return s;
}

int main(void) {
  int n = 101;
  double *a = malloc(sizeof(double) * n);
  double *b = malloc(sizeof(double) * n);
  long *la = malloc(sizeof(long) * n);
  long *ls = malloc(sizeof(long) * n);
  for (int i = 0; i < n; i++) {
    a[i] = (double)(i % 9) - 4.0 + 0.5 * (double)(i % 2);
    la[i] = (long)((i * 31) % 17) - 8;
  }

  reverse_copy(n, a, b);
  printf("reverse: b[0]=%.15g b[50]=%.15g b[100]=%.15g\n", b[0], b[50], b[100]);
  double_every_third_from_end(n, a);
  for (int i = 0; i < n; i += 10)
    printf("a[%d]=%.15g\n", i, a[i]);
  suffix_sums(n, la, ls);
  printf("suffix: s[0]=%ld s[1]=%ld s[50]=%ld s[100]=%ld\n", ls[0], ls[1], ls[50], ls[100]);

  int m = 12;
  double (*U)[m] = malloc(sizeof(double) * m * m);
  double *rhs = malloc(sizeof(double) * m);
  double *x = malloc(sizeof(double) * m);
  for (int i = 0; i < m; i++) {
    for (int j = 0; j < m; j++)
      U[i][j] = j < i ? 0.0 : (i == j ? 4.0 + i : 1.0 / (1.0 + i + j));
    rhs[i] = 1.0 + (double)i;
  }
  back_substitute(m, U, rhs, x);
  for (int i = 0; i < m; i++)
    printf("x[%d]=%.15g\n", i, x[i]);

  int p = 9;
  int (*out)[p + 1] = malloc(sizeof(int) * (p + 1) * (p + 1));
  for (int i = 0; i <= p; i++)
    for (int j = 0; j <= p; j++)
      out[i][j] = -1;
  countdown_pairs(p, out);
  for (int i = 0; i <= p; i++) {
    for (int j = 0; j <= p; j++)
      printf(" %d", out[i][j]);
    printf("\n");
  }

  for (int k = 0; k < 6; k++)
    printf("halving_sum(%d)=%d\n", k * 37, halving_sum(k * 37));

  free(a);
  free(b);
  free(la);
  free(ls);
  free(U);
  free(rhs);
  free(x);
  free(out);
  return 0;
}
