"""`python -m bench_polybench`: see bench_polybench/runner.py."""

import sys

from bench_polybench.runner import main

sys.exit(main())
