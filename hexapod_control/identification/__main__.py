"""python -m hexapod_control.identification: see hexapod_control.identification.cli."""

import sys

from hexapod_control.identification.cli import main

sys.exit(main())
