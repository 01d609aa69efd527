"""The environment variables a ROS 2 (rclpy) process of this project runs with.

One place for the logic shared by `scripts/env.sh` (shell) and `test/conftest.py` (pytest):

* FASTDDS_DEFAULT_PROFILES_FILE -> config/fastdds_loopback.xml, so DDS traffic stays on this
  machine (loopback UDP + shared memory). Fast DDS only *logs* an error for a missing or broken
  profile and then falls back to every network interface, so the file is checked here and a
  problem is an exception, not a silent fallback.
* RMW_IMPLEMENTATION=rmw_fastrtps_cpp, because the profile above is a Fast DDS profile.
* ROS_DOMAIN_ID, unless already set: derived from a process id, so that concurrent runs on one
  machine (two test sessions, a test session and a demo) do not see each other's topics.
* ROS_LOG_DIR, unless already set: rcl writes its log files there instead of ~/.ros/log.
* OPENBLAS_CORETYPE and NPY_DISABLE_CPU_FEATURES, on a CPU with AVX-512 and unless already set:
  NumPy's and OpenBLAS's AVX2 kernels (`AVX2_KERNELS`). Their AVX-512 kernels round differently
  (other summation orders, other transcendental functions), so the checks that the compiled code
  answers as the NumPy code to 1e-12, and the replay that reproduces a bag exactly, would hold on
  some machines of a kind and not on others.
* AMENT_PREFIX_PATH: the PyPI ROS wheels install their ament index into the venv prefix
  (<venv>/share/ament_index), which ament_index_python (launch, `get_package_share_directory`)
  only searches when that prefix is listed here. Message type support itself is found through
  LD_LIBRARY_PATH, which the wheels' `ros_wheels_bootstrapper` sets by re-executing Python.

Run as a script it prints `export` lines for a POSIX shell:
    eval "$(python test/ros_environment.py --pid $$ --log-dir DIR)"
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shlex
import sys
import xml.etree.ElementTree as ET
from collections.abc import Mapping, MutableMapping
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
FASTDDS_PROFILE = REPO_ROOT / "config" / "fastdds_loopback.xml"
RMW_IMPLEMENTATION = "rmw_fastrtps_cpp"

# Domain ids 1..100: 0 is the ROS default (other ROS software on the machine uses it), and all
# of 1..100 are valid for Fast DDS's default port mapping (up to 232).
DOMAIN_ID_MIN = 1
DOMAIN_ID_COUNT = 100

_FASTDDS_NS = "{http://www.eprosima.com}"
_AMENT_MARKER = Path("share", "ament_index", "resource_index", "packages", "rclpy")


class RosEnvironmentError(RuntimeError):
    """The environment for a ROS process cannot be set up safely."""


AVX2_KERNELS = {"OPENBLAS_CORETYPE": "Haswell", "NPY_DISABLE_CPU_FEATURES": "X86_V4 AVX512_ICL AVX512_SPR"}


def has_avx512(cpuinfo: Path = Path("/proc/cpuinfo")) -> bool:
    """Whether this (Linux, x86) machine's CPU has AVX-512 (its ``avx512f`` flag)."""
    try:
        return any(line.startswith("flags") and "avx512f" in line.split() for line in cpuinfo.open())
    except OSError:
        return False


def domain_id_for_pid(pid: int) -> int:
    """A ROS_DOMAIN_ID in 1..100 derived from a process id."""
    return DOMAIN_ID_MIN + pid % DOMAIN_ID_COUNT


def check_fastdds_profile(path: Path = FASTDDS_PROFILE) -> Path:
    """Return `path` if it is a readable Fast DDS profile with a default participant profile."""
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError) as exc:
        raise RosEnvironmentError(f"Fast DDS profile {path} is unusable: {exc}") from exc
    defaults = [
        p
        for p in root.iter(f"{_FASTDDS_NS}participant")
        if p.get("is_default_profile", "").lower() == "true"
    ]
    if not defaults:
        raise RosEnvironmentError(
            f'Fast DDS profile {path} has no participant with is_default_profile="true"'
        )
    return path


def ament_prefixes() -> list[str]:
    """Install prefixes holding an ament index with rclpy, for the rclpy this Python imports.

    For the PyPI wheels that is the venv (sys.prefix); for a system ROS install it is e.g.
    /opt/ros/<distro>. rclpy is located without importing it, so nothing DDS-related starts.
    """
    candidates = [Path(sys.prefix)]
    spec = importlib.util.find_spec("rclpy")
    if spec is not None and spec.origin:
        candidates.extend(Path(spec.origin).resolve().parents)
    found: list[str] = []
    for prefix in candidates:
        if (prefix / _AMENT_MARKER).is_file() and str(prefix) not in found:
            found.append(str(prefix))
    return found


def ros_environment(
    environ: Mapping[str, str], pid: int, log_dir: os.PathLike[str] | str
) -> dict[str, str]:
    """The variables to set on top of `environ` for a ROS process of this project.

    Only the variables that change are returned. `pid` seeds ROS_DOMAIN_ID and `log_dir` is
    ROS_LOG_DIR; both are kept if `environ` already has them.
    """
    changes = {
        "FASTDDS_DEFAULT_PROFILES_FILE": str(check_fastdds_profile()),
        "RMW_IMPLEMENTATION": RMW_IMPLEMENTATION,
    }
    if not environ.get("ROS_DOMAIN_ID"):
        changes["ROS_DOMAIN_ID"] = str(domain_id_for_pid(pid))
    if not environ.get("ROS_LOG_DIR"):
        changes["ROS_LOG_DIR"] = str(log_dir)
    if has_avx512():
        changes |= {name: value for name, value in AVX2_KERNELS.items() if not environ.get(name)}

    existing = [p for p in environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep) if p]
    missing = [p for p in ament_prefixes() if p not in existing]
    if missing:
        changes["AMENT_PREFIX_PATH"] = os.pathsep.join(missing + existing)

    pythonpath = [p for p in environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if str(REPO_ROOT) not in pythonpath:
        # `import hexapod_control` from the source tree without installing it.
        changes["PYTHONPATH"] = os.pathsep.join([str(REPO_ROOT), *pythonpath])
    return {k: v for k, v in changes.items() if environ.get(k) != v}


def apply(environ: MutableMapping[str, str], pid: int, log_dir: os.PathLike[str] | str) -> dict:
    """Set the variables of `ros_environment` in `environ` (e.g. os.environ); return them."""
    changes = ros_environment(environ, pid, log_dir)
    environ.update(changes)
    return changes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--pid",
        type=int,
        default=os.getppid(),
        help="process id that seeds ROS_DOMAIN_ID (default: the parent's)",
    )
    parser.add_argument(
        "--log-dir",
        default=str(REPO_ROOT / ".ros_log"),
        help="ROS_LOG_DIR if not already set (default: %(default)s)",
    )
    args = parser.parse_args(argv)
    try:
        changes = ros_environment(os.environ, args.pid, args.log_dir)
    except RosEnvironmentError as exc:
        print(f"ros_environment: {exc}", file=sys.stderr)
        return 1
    for key, value in changes.items():
        print(f"export {key}={shlex.quote(value)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
