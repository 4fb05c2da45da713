"""The Tensor Comprehensions frontend: lexer, parser, semantic checks, range inference and
lowering to affine MLIR (see polyflow/tc.py for the Python API)."""
