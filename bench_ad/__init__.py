"""Benchmark of polyflow's reverse-mode AD (issue 27): `python -m bench_ad`.

For each kernel and size it measures, on the CPU and in float64, polyflow's primal and gradient
times, the overhead gradient/primal, the gradient times of JAX (`jax.jit` of `jax.vjp`) and of
PyTorch autograd (eager, and `torch.compile` where it works), and checks polyflow's gradient
against JAX's. JAX and PyTorch run in child processes (`bench_ad.reference_child`): polyflow
forks to bound its compile time, and a fork of a process holding JAX's threads can deadlock.
Results go to `bench_ad/results/<date>-<size>.{md,json,png}`.
"""
