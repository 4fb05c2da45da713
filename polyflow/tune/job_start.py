"""A tuning job's process starts here, run by path (`python .../job_start.py JOB RESULT PARENT`,
see `worker.run_isolated`): it registers as a compile (`core_locks.register_compiling`) before
loading the compiler, whose start costs a core-second that a kernel timed beside it would feel;
then it is `python -m polyflow.tune.worker`."""

import importlib.util
import sys
from pathlib import Path


def _register() -> None:
    # core_locks.py by path: importing polyflow.tune would load the package (pydantic, ...)
    path = Path(__file__).resolve().with_name("core_locks.py")
    spec = importlib.util.spec_from_file_location("_polyflow_job_core_locks", path)
    assert spec is not None and spec.loader is not None
    locks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(locks)
    locks.register_compiling()


if __name__ == "__main__":
    _register()
    # this file's directory (its modules are polyflow.tune's) → the root polyflow is in
    sys.path[0] = str(Path(__file__).resolve().parents[2])
    from polyflow.tune import worker

    raise SystemExit(worker.main())
