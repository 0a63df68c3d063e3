"""``python -m workloadbuilder.cli``."""

import sys

from workloadbuilder.cli import main

sys.exit(main())
