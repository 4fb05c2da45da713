// polyflow: compiled=match,max_score,kernel_nussinov,longest_common_subsequence
/* PolyBench nussinov: dynamic programming over a triangular table with the outer loop counting
   down, max through ternaries and a helper, char sequences; and an LCS table. */
#include <stdio.h>
#include <stdlib.h>

int match(char b1, char b2) { return b1 + b2 == 3 ? 1 : 0; }

int max_score(int s1, int s2) { return s1 >= s2 ? s1 : s2; }

void kernel_nussinov(int n, const char *restrict seq, int table[n][n]) {
  for (int i = n - 1; i >= 0; i--) {
    for (int j = i + 1; j < n; j++) {
      if (j - 1 >= 0)
        table[i][j] = max_score(table[i][j], table[i][j - 1]);
      if (i + 1 < n)
        table[i][j] = max_score(table[i][j], table[i + 1][j]);
      if (j - 1 >= 0 && i + 1 < n) {
        if (i < j - 1)
          table[i][j] = max_score(table[i][j], table[i + 1][j - 1] + match(seq[i], seq[j]));
        else
          table[i][j] = max_score(table[i][j], table[i + 1][j - 1]);
      }
      for (int k = i + 1; k < j; k++)
        table[i][j] = max_score(table[i][j], table[i][k] + table[k + 1][j]);
    }
  }
}

int longest_common_subsequence(int n, int m, const char *restrict a, const char *restrict b,
                               int L[n + 1][m + 1]) {
  for (int i = 0; i <= n; i++)
    L[i][0] = 0;
  for (int j = 0; j <= m; j++)
    L[0][j] = 0;
  for (int i = 1; i <= n; i++)
    for (int j = 1; j <= m; j++)
      L[i][j] = a[i - 1] == b[j - 1] ? L[i - 1][j - 1] + 1
                                     : (L[i - 1][j] > L[i][j - 1] ? L[i - 1][j] : L[i][j - 1]);
  return L[n][m];
}

int main(void) {
  int n = 90;
  char *seq = malloc(n);
  int (*T)[n] = malloc(sizeof(int) * n * n);
  for (int i = 0; i < n; i++)
    seq[i] = (char)((i * 7 + i / 5) % 4);
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++)
      T[i][j] = 0;
  kernel_nussinov(n, seq, T);
  long s = 0;
  for (int i = 0; i < n; i++)
    for (int j = i; j < n; j++)
      s += (long)T[i][j] * ((i + j) % 10 + 1);
  printf("nussinov T[0][n-1]=%d T[10][50]=%d weighted=%ld\n", T[0][n - 1], T[10][50], s);

  int la = 70, lb = 55;
  char *a = malloc(la);
  char *b = malloc(lb);
  int (*L)[lb + 1] = malloc(sizeof(int) * (la + 1) * (lb + 1));
  for (int i = 0; i < la; i++)
    a[i] = (char)('a' + (i * 5) % 7);
  for (int j = 0; j < lb; j++)
    b[j] = (char)('a' + (j * 3 + 1) % 6);
  printf("lcs=%d", longest_common_subsequence(la, lb, a, b, L));
  printf(" L[35][20]=%d L[70][1]=%d\n", L[35][20], L[la][1]);

  free(seq);
  free(T);
  free(a);
  free(b);
  free(L);
  return 0;
}
