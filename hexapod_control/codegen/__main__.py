"""``python -m hexapod_control.codegen [--check] [--output PATH]``."""

import sys

from hexapod_control.codegen.derive_dynamics import main

if __name__ == "__main__":
    sys.exit(main())
