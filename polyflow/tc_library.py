"""A library of Tensor Comprehensions for common layers, written here from their definitions.

`LIBRARY[name]` is the TC source of definition `name`; `polyflow.tc.define(LIBRARY[name],
name)` makes it callable. Each one is checked against NumPy in tests/test_tc_library.py.
Intermediate results a layer needs (means, row maxima) are outputs too, as TC requires.
"""

from __future__ import annotations

MATMUL = """
def matmul(float(M,K) A, float(K,N) B) -> (C) {
  C(m, n) +=! A(m, k) * B(k, n)
}
"""

MATMUL_TRANSPOSED = """
# C = A * B^T: both operands walk k contiguously
def matmul_transposed(float(M,K) A, float(N,K) B) -> (C) {
  C(m, n) +=! A(m, k) * B(n, k)
}
"""

BATCH_MATMUL = """
def batch_matmul(float(B,M,K) X, float(B,K,N) Y) -> (Z) {
  Z(b, m, n) +=! X(b, m, k) * Y(b, k, n)
}
"""

MATVEC = """
def matvec(float(M,K) A, float(K) x) -> (y) {
  y(i) +=! A(i, k) * x(k)
}
"""

FCRELU = """
# a fully connected layer and a ReLU: out = max(in * weight^T + bias, 0)
def fcrelu(float(B,I) in, float(O,I) weight, float(O) bias) -> (out) {
  out(b, o) = bias(o) where b in 0:B
  out(b, o) += in(b, i) * weight(o, i)
  out(b, o) = fmax(out(b, o), 0)
}
"""

MLP2 = """
def mlp2(float(B,I) in, float(H,I) w1, float(H) b1, float(O,H) w2, float(O) b2)
    -> (hidden, out) {
  hidden(b, h) = b1(h) where b in 0:B
  hidden(b, h) += in(b, i) * w1(h, i)
  hidden(b, h) = fmax(hidden(b, h), 0)
  out(b, o) = b2(o) where b in 0:B
  out(b, o) += hidden(b, h) * w2(o, h)
}
"""

MAXPOOL2X2 = """
def maxpool2x2(float(N,C,H,W) in) -> (out) {
  out(n, c, i, j) max=! in(n, c, 2 * i + kh, 2 * j + kw) where kh in 0:2, kw in 0:2
}
"""

AVGPOOL2X2 = """
def avgpool2x2(float(N,C,H,W) in) -> (out) {
  out(n, c, i, j) +=! 0.25 * in(n, c, 2 * i + kh, 2 * j + kw) where kh in 0:2, kw in 0:2
}
"""

CONV2D = """
# valid (unpadded) 2-D convolution, NCHW
def conv2d(float(N,C,H,W) in, float(K,C,KH,KW) weight) -> (out) {
  out(n, k, h, w) +=! in(n, c, h + kh, w + kw) * weight(k, c, kh, kw)
}
"""

STRIDED_CONV2D = """
# stride 2 in both directions, then a bias per output channel
def strided_conv2d(float(N,C,H,W) in, float(K,C,KH,KW) weight, float(K) bias) -> (out) {
  out(n, k, h, w) +=! in(n, c, 2 * h + kh, 2 * w + kw) * weight(k, c, kh, kw)
  out(n, k, h, w) = out(n, k, h, w) + bias(k)
}
"""

GROUP_CONV2D = """
# G groups of C input and F output channels each
def group_conv2d(float(N,G,C,H,W) in, float(G,F,C,KH,KW) weight) -> (out) {
  out(n, g, f, h, w) +=! in(n, g, c, h + kh, w + kw) * weight(g, f, c, kh, kw)
}
"""

BATCHNORM = """
# batch normalization in training mode: moments over (N, H, W) per channel, then scale and shift
def batchnorm(float(N,C,H,W) in, float(C) gamma, float(C) beta) -> (mean, var, out) {
  mean(c) +=! in(n, c, h, w) / (N * H * W)
  var(c) +=! (in(n, c, h, w) - mean(c)) * (in(n, c, h, w) - mean(c)) / (N * H * W)
  out(n, c, h, w) = gamma(c) * (in(n, c, h, w) - mean(c)) * rsqrt(var(c) + 1e-5) + beta(c)
}
"""

SOFTMAX = """
# a numerically stable softmax over the last dimension
def softmax(float(N,D) x) -> (row_max, e, total, y) {
  row_max(n) max=! x(n, d)
  e(n, d) = exp(x(n, d) - row_max(n))
  total(n) +=! e(n, d)
  y(n, d) = e(n, d) / total(n)
}
"""

LAYERNORM = """
def layernorm(float(N,D) x, float(D) gamma, float(D) beta) -> (mean, var, y) {
  mean(n) +=! x(n, d) / D
  var(n) +=! (x(n, d) - mean(n)) * (x(n, d) - mean(n)) / D
  y(n, d) = gamma(d) * (x(n, d) - mean(n)) * rsqrt(var(n) + 1e-5) + beta(d)
}
"""

EMBEDDING = """
# rows of a table picked by index (a gather)
def embedding(float(V,D) table, int64(N) ids) -> (out) {
  out(n, d) = table(ids(n), d)
}
"""

KRONECKER2 = """
# y = (A kron B) vec(X), without forming the Kronecker product: Y = A X B^T
def kronecker2(float(P,Q) A, float(R,S) B, float(Q,S) X) -> (T, Y) {
  T(q, r) +=! X(q, s) * B(r, s)
  Y(p, r) +=! A(p, q) * T(q, r)
}
"""

LIBRARY: dict[str, str] = {
    "matmul": MATMUL,
    "matmul_transposed": MATMUL_TRANSPOSED,
    "batch_matmul": BATCH_MATMUL,
    "matvec": MATVEC,
    "fcrelu": FCRELU,
    "mlp2": MLP2,
    "maxpool2x2": MAXPOOL2X2,
    "avgpool2x2": AVGPOOL2X2,
    "conv2d": CONV2D,
    "strided_conv2d": STRIDED_CONV2D,
    "group_conv2d": GROUP_CONV2D,
    "batchnorm": BATCHNORM,
    "softmax": SOFTMAX,
    "layernorm": LAYERNORM,
    "embedding": EMBEDDING,
    "kronecker2": KRONECKER2,
}
