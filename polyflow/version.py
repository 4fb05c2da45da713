"""polyflow's release (the package metadata and `polyflow --version` read it here)."""

__version__ = "0.1.0"
