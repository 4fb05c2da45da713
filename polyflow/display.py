"""How compiled kernels show themselves in notebooks and terminals."""
