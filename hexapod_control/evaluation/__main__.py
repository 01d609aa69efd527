"""python -m hexapod_control.evaluation BAG [BAG ...]: see hexapod_control.evaluation.cli."""

import sys

from hexapod_control.evaluation.cli import main

sys.exit(main())
