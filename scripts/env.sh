# Source this file (bash): puts the project's .venv on PATH and exports what rclpy needs.
#   source scripts/env.sh
# Run scripts/bootstrap.sh first; the variables are explained in test/ros_environment.py:
#   FASTDDS_DEFAULT_PROFILES_FILE  config/fastdds_loopback.xml (DDS stays on this machine)
#   RMW_IMPLEMENTATION             rmw_fastrtps_cpp (the profile is a Fast DDS one)
#   ROS_DOMAIN_ID                  kept if set, else 1..100 from this shell's process id
#   ROS_LOG_DIR                    kept if set, else <repo>/.ros_log
#   AMENT_PREFIX_PATH              + the venv, where the PyPI ROS wheels put share/ament_index
#   PYTHONPATH                     + the repo root, so `import hexapod_control` needs no install
#   OPENBLAS_CORETYPE, NPY_DISABLE_CPU_FEATURES   on an AVX-512 CPU, unless set: the AVX2 kernels

_hexapod_repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if [[ ! -x "$_hexapod_repo/.venv/bin/python" ]]; then
    echo "env.sh: no $_hexapod_repo/.venv; run scripts/bootstrap.sh first" >&2
    unset _hexapod_repo
    return 1
fi
export VIRTUAL_ENV="$_hexapod_repo/.venv"
# The ROS wheels' ros_wheels_bootstrapper re-executes Python once with LD_LIBRARY_PATH set to the
# running venv's ROS libraries, and marks that with this variable. Inherited from a Python process
# of another venv, the mark would make this venv's Python skip that step.
unset _ROS_WHEELS_BOOTSTRAP_COMPLETE
case ":$PATH:" in
    *":$VIRTUAL_ENV/bin:"*) ;;
    *) export PATH="$VIRTUAL_ENV/bin:$PATH" ;;
esac
if _hexapod_exports="$("$VIRTUAL_ENV/bin/python" "$_hexapod_repo/test/ros_environment.py" \
        --pid "$$" --log-dir "$_hexapod_repo/.ros_log")"; then
    eval "$_hexapod_exports"
    mkdir -p "$ROS_LOG_DIR"
    unset _hexapod_repo _hexapod_exports
else
    unset _hexapod_repo _hexapod_exports
    return 1
fi
