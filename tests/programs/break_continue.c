// polyflow: compiled=sum_skip_multiples,row_prefix_until_negative,first_duplicate_distance,sieve_count,while_break_continue,do_while_continue
/* break and continue in for, nested for (inner only), while and do-while loops. */
#include <stdio.h>
#include <stdlib.h>

long sum_skip_multiples(int n, int k) {
  long s = 0;
  for (int i = 1; i <= n; i++) {
    if (i % k == 0)
      continue;
    s += i;
  }
  return s;
}

/* per row, the sum of the elements before the first negative one; break leaves only the inner loop */
void row_prefix_until_negative(int n, int m, int A[n][m], int *restrict out) {
  for (int i = 0; i < n; i++) {
    int s = 0;
    for (int j = 0; j < m; j++) {
      if (A[i][j] < 0)
        break;
      if (A[i][j] == 0)
        continue;
      s += A[i][j];
    }
    out[i] = s;
  }
}

/* the smallest distance between two equal values, with an early break once it cannot improve */
int first_duplicate_distance(int n, const int *restrict a) {
  int best = n;
  for (int i = 0; i < n; i++) {
    for (int j = i + 1; j < n; j++) {
      if (j - i >= best)
        break;
      if (a[i] != a[j])
        continue;
      best = j - i;
      break;
    }
    if (best == 1)
      break;
  }
  return best;
}

int sieve_count(int n, int *restrict composite) {
  for (int i = 0; i <= n; i++)
    composite[i] = 0;
  int count = 0;
  for (int i = 2; i <= n; i++) {
    if (composite[i])
      continue;
    count++;
    if (i > n / i)
      continue;
    for (int j = i * i; j <= n; j += i)
      composite[j] = 1;
  }
  return count;
}

int while_break_continue(int n, const int *restrict a) {
  int i = -1, acc = 0;
  while (1) {
    i++;
    if (i >= n)
      break;
    if (a[i] % 3 == 0)
      continue;
    acc += a[i];
    if (acc > 5000)
      break;
  }
  return acc * 1000 + i;
}

/* continue in a do-while jumps to the condition, which still advances i */
int do_while_continue(int n, const int *restrict a) {
  int i = 0, odd_sum = 0;
  do {
    int v = a[i];
    i++;
    if (v % 2 == 0)
      continue;
    odd_sum += v;
  } while (i < n);
  return odd_sum;
}

int main(void) {
  int n = 120, m = 9;
  int *a = malloc(sizeof(int) * n);
  int (*A)[m] = malloc(sizeof(int) * n * m);
  int *out = malloc(sizeof(int) * n);
  int *comp = malloc(sizeof(int) * 1001);
  for (int i = 0; i < n; i++) {
    a[i] = (i * 53 + 7) % 97;
    for (int j = 0; j < m; j++)
      A[i][j] = (i * 3 + j * 7) % 11 - 1;
  }

  for (int k = 2; k <= 5; k++)
    printf("sum_skip_multiples(%d)=%ld\n", k, sum_skip_multiples(1000, k));
  row_prefix_until_negative(n, m, A, out);
  long s = 0;
  for (int i = 0; i < n; i++)
    s += (long)out[i] * (i + 1);
  printf("row prefixes weighted=%ld out[0..5]=%d %d %d %d %d %d\n", s, out[0], out[1], out[2],
         out[3], out[4], out[5]);
  printf("first_duplicate_distance=%d\n", first_duplicate_distance(n, a));
  for (int i = 0; i < n; i++)
    a[i] = i * 2 + 1;
  printf("first_duplicate_distance (distinct)=%d\n", first_duplicate_distance(n, a));
  printf("primes<=1000: %d, primes<=97: %d\n", sieve_count(1000, comp), sieve_count(97, comp));
  for (int i = 0; i < n; i++)
    a[i] = (i * 29 + 3) % 211;
  printf("while_break_continue=%d\n", while_break_continue(n, a));
  printf("while_break_continue (short)=%d\n", while_break_continue(10, a));
  printf("do_while_continue=%d\n", do_while_continue(n, a));
  printf("do_while_continue (one)=%d\n", do_while_continue(1, a));

  free(a);
  free(A);
  free(out);
  free(comp);
  return 0;
}
