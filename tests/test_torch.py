"""polyflow.torch: TC kernels inside PyTorch models, forward and backward compiled by polyflow.
Checked with torch.autograd.gradcheck in double, and by training a small model whose every loss
and weight must match the same model written with torch's own operators."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="PyTorch's CPU build is not installed (setup.sh)")

import polyflow.tc as tc  # noqa: E402
from polyflow.torch import function  # noqa: E402

LAYER = """def layer(double(B,I) X, double(O,I) W, double(O) b) -> (Y) {
  Y(n,o) +=! X(n,i) * W(o,i)
  Y(n,o) = tanh(Y(n,o) + b(o))
}"""


def test_gradcheck_passes_in_double() -> None:
    layer = function(tc.define(LAYER))
    generator = torch.Generator().manual_seed(0)
    X, W, b = (
        torch.randn(shape, dtype=torch.float64, generator=generator, requires_grad=True)
        for shape in ((4, 5), (3, 5), (3,))
    )
    assert torch.autograd.gradcheck(layer, (X, W, b))
    W.grad = None
    X.requires_grad_(False)  # only W and b: the gradient is compiled for those alone
    layer(X, W, b).pow(2).sum().backward()
    assert W.grad is not None and X.grad is None


def test_a_tc_layer_trains_like_the_same_layer_in_torch() -> None:
    """Ten SGD steps of a TC layer and of torch's own tanh(X Wᵀ + b): same losses, same
    weights (to rounding)."""
    layer = function(tc.define(LAYER))
    generator = torch.Generator().manual_seed(1)
    X = torch.randn(32, 8, dtype=torch.float64, generator=generator)
    target = torch.tanh(X @ torch.randn(4, 8, dtype=torch.float64, generator=generator).T)
    ours = [torch.zeros(4, 8, dtype=torch.float64), torch.zeros(4, dtype=torch.float64)]
    theirs = [p.clone() for p in ours]
    for params in (ours, theirs):
        for p in params:
            p.requires_grad_(True)
    optimizers = [torch.optim.SGD(ours, lr=0.5), torch.optim.SGD(theirs, lr=0.5)]
    losses: list[tuple[float, float]] = []
    for _ in range(10):
        for optimizer in optimizers:
            optimizer.zero_grad()
        mine = (layer(X, *ours) - target).pow(2).mean()
        reference = (torch.tanh(X @ theirs[0].T + theirs[1]) - target).pow(2).mean()
        mine.backward()
        reference.backward()
        for optimizer in optimizers:
            optimizer.step()
        losses.append((mine.item(), reference.item()))
    got, want = np.array(losses).T
    assert want[-1] < 0.5 * want[0]  # it does learn
    np.testing.assert_allclose(got, want, rtol=1e-12)
    for p, q in zip(ours, theirs, strict=True):
        torch.testing.assert_close(p, q, rtol=1e-12, atol=1e-12)


def test_float_tensors_and_several_outputs() -> None:
    stats = function(
        tc.define(
            """def stats(float(N,D) X) -> (mean, sq) {
                 mean(n) +=! X(n,d) / D
                 sq(n) +=! X(n,d) * X(n,d)
               }"""
        )
    )
    X = torch.rand(6, 10, requires_grad=True)
    mean, sq = stats(X)
    (mean.sum() + 0.5 * sq.sum()).backward()
    assert X.grad is not None
    torch.testing.assert_close(X.grad, torch.full_like(X, 0.1) + X.detach(), rtol=1e-6, atol=1e-6)
    with pytest.raises(TypeError, match="takes 1 arguments"):
        stats(X, X)
