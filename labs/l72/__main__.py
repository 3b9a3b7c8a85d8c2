"""``python -m labs.l72``: the same command line as ``python -m labs l72``."""

import sys

from labs.l72.cli import main

sys.exit(main())
