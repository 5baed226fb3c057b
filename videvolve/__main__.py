"""``python -m videvolve``."""

import sys

from videvolve.cli import main

sys.exit(main())
