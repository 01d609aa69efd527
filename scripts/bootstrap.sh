#!/usr/bin/env bash
# Create or update the project's virtual environment in <repo>/.venv.
#
# First run: python3 -m venv .venv, then pip install -r requirements-dev.txt -c constraints.txt
# (numpy, scipy, ..., the ROS 2 rclpy wheels and the test tools, each at the version the tests
# passed with; scripts/refresh_constraints.py rewrites the lock). A stamp with the hash of the
# requirements and constraints files is kept in .venv, so later runs return at once and reinstall
# only when one of them changed.
#
# HEXAPOD_PYTHON picks the interpreter for a new venv (default: python3). It must be CPython 3.11:
# the ROS 2 wheels on PyPI are built for cp311 only.
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$REPO_ROOT/.venv"
STAMP="$VENV/.requirements.sha256"
PYTHON="${HEXAPOD_PYTHON:-python3}"

say() { echo "bootstrap: $*" >&2; }

cd "$REPO_ROOT"
wanted="$(cat requirements.txt requirements-ros.txt requirements-test.txt requirements-dev.txt constraints.txt | sha256sum | cut -d' ' -f1)"

if [[ -x "$VENV/bin/python" ]] && ! "$VENV/bin/python" -c 'pass' 2>/dev/null; then
    say "$VENV is broken (its interpreter does not run); recreating it"
    rm -rf "$VENV"
fi
if [[ ! -x "$VENV/bin/python" ]]; then
    say "creating $VENV with $("$PYTHON" --version 2>&1) ($(command -v "$PYTHON"))"
    "$PYTHON" -m venv "$VENV"
fi

if [[ -f "$STAMP" && "$(cat "$STAMP")" == "$wanted" ]]; then
    say "$VENV is up to date with requirements-dev.txt"
    exit 0
fi

say "installing requirements-dev.txt into $VENV (a few minutes on a new venv: NumPy, SciPy, SymPy, MuJoCo,"
say "the ROS 2 rclpy and message wheels, the test tools); one line per package follows"
# stdout: one line per package pip collects, then what it installed (the download progress bars
# and requirement lines are dropped). stderr: pip's warnings about configured local package
# folders that do not exist on this machine (one per package, hundreds of lines) are dropped,
# everything else pip says is kept.
"$VENV/bin/python" -m pip install --disable-pip-version-check --progress-bar off -r requirements-dev.txt -c constraints.txt \
    2> >(grep -v "^WARNING: Location '.*' is ignored: it is neither a file nor a directory" >&2) \
    | { grep --line-buffered -E "^(Collecting|Installing collected|Successfully installed)" || true; } \
    | sed -u "s/^/bootstrap: pip: /" >&2
echo "$wanted" > "$STAMP"
say "done"
