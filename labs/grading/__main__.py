import sys

from labs.grading.cli import main

sys.exit(main())
