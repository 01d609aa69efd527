#!/usr/bin/env bash
# Run the test suite: ./scripts/run_tests.sh [pytest arguments...]
# Sets up .venv on first use (scripts/bootstrap.sh), then the ROS environment (scripts/env.sh).
# Exits with pytest's exit code.
set -euo pipefail
REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$REPO_ROOT/scripts/bootstrap.sh"
# shellcheck source=env.sh
source "$REPO_ROOT/scripts/env.sh"
cd "$REPO_ROOT"
# No path given: pytest collects testpaths (test/, setup.cfg); given paths run alone.
echo "run_tests: ROS_DOMAIN_ID=$ROS_DOMAIN_ID, python -m pytest $*" >&2
exec python -m pytest "$@"
