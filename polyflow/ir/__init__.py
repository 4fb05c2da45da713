"""What every MLIR stage shares, below all of them: the names polyflow gives things in the IR
(`names.py`), source positions read off locations (`locations.py`), function and symbol helpers
(`functions.py`) and the one alias analysis (`aliasing.py`)."""
