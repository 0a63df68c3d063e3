"""``python -m scheduler.simulator SCENARIO.yaml``."""

import sys

from scheduler.simulator.cli import main

sys.exit(main())
