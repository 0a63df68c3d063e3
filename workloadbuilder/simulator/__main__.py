"""``python -m workloadbuilder.simulator SCENARIO.yaml``."""

import sys

from workloadbuilder.simulator.cli import main

sys.exit(main())
