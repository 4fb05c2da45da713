"""The drivers: what turns a request (a C file, a C function, a TC definition) into a program,
an object or a callable, through the compile cache and the pipeline. `compile.py` is the one
entry every user reaches (the CLI, `compile_c`, `polyflow.tc`, the service); `build.py` links
programs, `jit.py` loads code into this process."""
