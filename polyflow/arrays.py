"""Arrays of every library at the boundary of a compiled kernel (NumPy, PyTorch, JAX, CuPy),
through DLPack and without copies."""
