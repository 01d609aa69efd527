"""``python -m hexapod_control <verb>``: the ``hexapod`` command (:mod:`hexapod_control.command`)."""

import sys

from hexapod_control.command import main

sys.exit(main())
