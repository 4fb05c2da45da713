"""`python -m bench_ad [--kernels a,b] [--size small|full] [--repeat N]`."""

import sys

from bench_ad.cli import main

sys.exit(main())
