// polyflow: compiled=find_pair_flags,count_pairs
// polyflow: fallback=find_pair_goto
/* The same search written with goto (left to the C compiler) and with flags and break (compiled). */
#include <stdio.h>
#include <stdlib.h>

/* first (i, j), i < j, with a[i] + a[j] == target, encoded as i * n + j; -1 if none */
int find_pair_goto(int n, const int *restrict a, int target) {
  int i, j;
  for (i = 0; i < n; i++)
    for (j = i + 1; j < n; j++)
      if (a[i] + a[j] == target)
        goto found;
  return -1;
found:
  return i * n + j;
}

int find_pair_flags(int n, const int *restrict a, int target) {
  int result = -1;
  for (int i = 0; i < n && result < 0; i++)
    for (int j = i + 1; j < n; j++)
      if (a[i] + a[j] == target) {
        result = i * n + j;
        break;
      }
  return result;
}

int count_pairs(int n, const int *restrict a, int target) {
  int c = 0;
  for (int i = 0; i < n; i++)
    for (int j = i + 1; j < n; j++)
      c += a[i] + a[j] == target;
  return c;
}

int main(void) {
  int n = 90;
  int *a = malloc(sizeof(int) * n);
  for (int i = 0; i < n; i++)
    a[i] = (i * 37 + 11) % 211;
  for (int t = 0; t < 420; t += 35) {
    int g = find_pair_goto(n, a, t);
    int f = find_pair_flags(n, a, t);
    printf("target %d: goto=%d flags=%d same=%d pairs=%d\n", t, g, f, g == f, count_pairs(n, a, t));
  }
  free(a);
  return 0;
}
