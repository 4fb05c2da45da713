// polyflow: compiled=takes_char,takes_double,takes_int,returns_char,returns_float,returns_int,call_conversions,compound_with_wider_rhs,increments_of_all_types,literal_forms,chained_and_embedded_assignment,scopes_and_shadowing,index_changed_in_body,bound_changed_in_body,local_array_initializer,weighted_sum3,pass_local_and_global_arrays
/* Conversions the C front end must insert on its own: arguments converted to parameter types,
   return values to the return type, compound assignments computed in the wider type and
   narrowed back; plus literal forms, chained and embedded assignments, block scopes that shadow,
   loops whose index or bound changes in the body, initialized local arrays. */
#include <stdio.h>
#include <stdlib.h>

int gtable[6] = {3, 1, 4, 1, 5, 9};

int takes_char(char c) { return c * 2; }
double takes_double(double d) { return d / 4.0; }
int takes_int(int i) { return i % 1000; }
char returns_char(int x) { return x; }
float returns_float(double d) { return d; }
int returns_int(double d) { return d; }

/* int -> char parameter (300 becomes 44), int -> double, double -> int, narrowing returns */
long call_conversions(int n, const int *restrict a, const double *restrict d) {
  long s = 0;
  for (int i = 0; i < n; i++) {
    s += takes_char(a[i]);
    s += (long)(takes_double(a[i]) * 8.0);
    s += takes_int(d[i] * 10.0);
    s += returns_char(a[i] * 3);
    s += (long)(returns_float(d[i] / 3.0) * 1048576.0);
    s += returns_int(d[i] * -2.5);
  }
  return s;
}

/* i *= 2.5 is i = (int)(i * 2.5); f += 0.1 is computed in double, then rounded to float */
void compound_with_wider_rhs(int n, int *restrict iv, char *restrict cv, float *restrict fv,
                             short *restrict sv) {
  for (int i = 0; i < n; i++) {
    iv[i] *= 2.5;
    iv[i] -= 0.75;
    cv[i] += 100;
    fv[i] += 0.1;
    fv[i] *= 1.0 / 3.0;
    sv[i] *= 7;
    sv[i] /= 2.0;
  }
}

void increments_of_all_types(int n, double *restrict d, float *restrict f,
                             unsigned char *restrict uc, long *restrict l) {
  for (int i = 0; i < n; i++) {
    d[i]++;
    ++f[i];
    float old = f[i]--;
    f[i] += old;
    uc[i]++;
    uc[i] += 250;
    l[i]--;
    --l[i];
  }
}

/* octal, hex, suffixed, char and escape literals, hex float, literals that are unsigned */
long literal_forms(int k) {
  long s = 010 + 0x1F + 07L + 'A' + '\n' + '\0' + '\x7f' + (long)1e3 + (long)(.5 * 4) +
           (long)(5. * 2) + (long)(0x1p-2 * 64) + 2147483648L / 1024;
  unsigned u = 0xffffffff;
  s += 0xffffffff / 2 + (0xffffffff + 1 == 0);
  s += (u >> 28) + 4294967295u / 65536u;
  s += (long)(2.5e-1f * 16) + k * 1000000L;
  s += ~(unsigned char)k & 0xff;
  return s;
}

int chained_and_embedded_assignment(int n, const int *restrict a, int *restrict b,
                                    int *restrict c) {
  int t, count = 0;
  for (int i = 0; i < n; i++) {
    b[i] = c[i] = a[i] * 2;
    if ((t = a[i] - 3) > 0)
      count += t;
    c[i] += (b[i] = 1) + t;
  }
  return count;
}

int scopes_and_shadowing(int n) {
  int x = 1, y = x + 1, s = 0;
  for (int i = 0; i < n; i++) {
    int x = i * 10;
    {
      int y = x + 5;
      s += y;
    }
    s += x + y;
  }
  for (int x = 0; x < 3; x++)
    s += x;
  return s * 100 + x * 10 + y;
}

/* skips the element after each zero by advancing the index inside the body */
int index_changed_in_body(int n, const int *restrict a) {
  int s = 0;
  for (int i = 0; i < n; i++) {
    s += a[i];
    if (a[i] == 0)
      i++;
  }
  return s;
}

/* the bound shrinks while the loop runs */
int bound_changed_in_body(int n, const int *restrict a) {
  int m = n, visits = 0;
  for (int i = 0; i < m; i++) {
    visits++;
    if (a[i] > 20)
      m--;
  }
  return visits * 1000 + m;
}

int local_array_initializer(int n, const int *restrict a) {
  int w[5] = {1, 3, 5, 3, 1};
  double scale[3] = {0.5, 0.25};
  int s = 0;
  for (int i = 2; i < n - 2; i++)
    for (int k = 0; k < 5; k++)
      s += w[k] * a[i + k - 2];
  return s + (int)(scale[0] * 8) + (int)(scale[2] * 100.0) + (int)(scale[1] * 100.0);
}

int weighted_sum3(int n, const int *restrict w, const int *restrict v) {
  int s = 0;
  for (int i = 0; i < n; i++)
    s += w[i] * v[i];
  return s;
}

/* a local array and a global array passed whole to another function */
int pass_local_and_global_arrays(int n, const int *restrict a) {
  int local[6];
  for (int i = 0; i < 6; i++)
    local[i] = a[i % n] - i;
  return weighted_sum3(6, local, gtable) * 10 + weighted_sum3(6, gtable, gtable);
}

int main(void) {
  int n = 20;
  int *a = malloc(sizeof(int) * n);
  int *b = malloc(sizeof(int) * n);
  int *c = malloc(sizeof(int) * n);
  double *d = malloc(sizeof(double) * n);
  float *f = malloc(sizeof(float) * n);
  char *cv = malloc(n);
  short *sv = malloc(sizeof(short) * n);
  unsigned char *uc = malloc(n);
  long *l = malloc(sizeof(long) * n);
  for (int i = 0; i < n; i++) {
    a[i] = i * 37 % 400 - 50;
    d[i] = (double)i * 0.37 - 2.0;
    f[i] = (float)i * 0.3f;
    cv[i] = (char)(i * 3);
    sv[i] = (short)(i * 211 - 1500);
    uc[i] = (unsigned char)(i * 13);
    l[i] = (long)i * 1000000007L;
  }

  printf("call_conversions=%ld\n", call_conversions(n, a, d));
  for (int i = 0; i < n; i++)
    b[i] = i * 5 - 40;
  compound_with_wider_rhs(n, b, cv, f, sv);
  for (int i = 0; i < n; i++)
    printf("%d %d %.8g %d\n", b[i], (int)cv[i], f[i], (int)sv[i]);
  for (int i = 0; i < n; i++)
    f[i] = (float)i * 0.3f;
  increments_of_all_types(n, d, f, uc, l);
  for (int i = 0; i < n; i += 3)
    printf("%.15g %.8g %u %ld\n", d[i], f[i], (unsigned)uc[i], l[i]);
  printf("literal_forms=%ld %ld\n", literal_forms(0), literal_forms(77));
  for (int i = 0; i < n; i++)
    a[i] = i % 7 - 1;
  int cnt = chained_and_embedded_assignment(n, a, b, c);
  printf("chained count=%d:", cnt);
  for (int i = 0; i < n; i++)
    printf(" %d/%d", b[i], c[i]);
  printf("\n");
  printf("scopes_and_shadowing=%d\n", scopes_and_shadowing(6));
  printf("index_changed_in_body=%d\n", index_changed_in_body(n, a));
  for (int i = 0; i < n; i++)
    b[i] = (i * 17) % 31;
  printf("bound_changed_in_body=%d\n", bound_changed_in_body(n, b));
  printf("local_array_initializer=%d\n", local_array_initializer(n, b));
  printf("pass_local_and_global_arrays=%d\n", pass_local_and_global_arrays(n, b));

  free(a);
  free(b);
  free(c);
  free(d);
  free(f);
  free(cv);
  free(sv);
  free(uc);
  free(l);
  return 0;
}
