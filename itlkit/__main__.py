"""`python -m itlkit` runs the command line."""

import sys

from itlkit.cli import main

sys.exit(main())
