"""The CPU lowering stage: affine/SCF/OpenMP/vector MLIR to the LLVM dialect
(`llvm_dialect.py`), then to LLVM IR, LLVM's optimizer and object code (`llvm_ir.py`)."""
