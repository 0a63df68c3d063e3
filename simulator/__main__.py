"""``python -m simulator SCENARIO.yaml``."""

import sys

from simulator.cli import main

sys.exit(main())
