"""polyflow's compile service (FastAPI): `polyflow serve`, or `python -m server`."""

from .app import CompileRequest, ServeConfig, create_app

__all__ = ["CompileRequest", "ServeConfig", "create_app"]
