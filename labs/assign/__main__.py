import sys

from labs.assign import main

sys.exit(main())
