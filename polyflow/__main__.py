import sys

from polyflow.cli import main

sys.exit(main())
