#!/usr/bin/env bash
# Run the main job (hexapod_control.main_job): ./scripts/run_main_job.sh [--duration 30] [--backend mujoco] ...
# Sets up .venv on first use (scripts/bootstrap.sh), then the ROS environment (scripts/env.sh).
set -euo pipefail
REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$REPO_ROOT/scripts/bootstrap.sh"
# shellcheck source=env.sh
source "$REPO_ROOT/scripts/env.sh"
cd "$REPO_ROOT"
exec python -m hexapod_control.main_job "$@"
