"""pytest setup shared by all tests.

`pytest_configure` runs before any test module is collected, so before any test creates an
rclpy context or node: that is when the DDS middleware reads its environment, and the
variables below must be in place by then (see ros_environment.py for what each one is for).
Merely importing rclpy earlier (a pytest plugin may) is harmless.
"""

import importlib.util
import os
import shutil
import sys
import tempfile

import pytest
import ros_environment
import ros_helpers

_ROS_LOG_DIR = None


def pytest_configure(config):
    global _ROS_LOG_DIR
    rclpy = sys.modules.get("rclpy")
    if rclpy is not None and rclpy.ok():
        # DDS already started without this setup: refuse rather than run off the profile.
        raise pytest.UsageError(
            "rclpy was initialised before test/conftest.py configured the ROS environment"
        )
    _ROS_LOG_DIR = tempfile.mkdtemp(prefix="hexapod_ros_log_")
    try:
        ros_environment.apply(os.environ, os.getpid(), _ROS_LOG_DIR)
    except ros_environment.RosEnvironmentError as exc:
        raise pytest.UsageError(str(exc)) from exc
    if importlib.util.find_spec("hexapod_control") is None:
        # Not installed (e.g. bare `pytest` in a checkout): test the source tree, as the
        # PYTHONPATH entry does for child processes. An installed package (colcon) is kept.
        sys.path.insert(0, str(ros_environment.REPO_ROOT))


# Test tiers, registered as markers in setup.cfg: every test is unit, dds or launch, and a slow one
# is slow instead of unit (or on top of dds); `pytest -m unit` runs the fast tier, in under a minute.
# A test is dds when it uses an rclpy context (the `context` fixture, directly or through another
# fixture) or is listed in DDS (it makes its own context); launch when its file is a
# launch_testing file. It is slow when it is a Hypothesis property test (hundreds of generated
# cases), when its file is listed in SLOW, or when it carries `@pytest.mark.slow` itself: a test
# that takes half a second or more (long simulations, closed loops, compiling, subprocesses,
# whole commands) on this project's 2-core machine. Entries are file names or "file::test name"
# (all its parametrisations).
TIERS = ("unit", "dds", "launch", "slow")
DDS = (
    "test_inverse_dynamics_node.py",
    "test_main_job.py::test_direct_transport_records_what_the_ros_stack_records",
    "test_nodes_stack.py::test_closed_loop_tracks_the_joint_space_trajectory",
    "test_nodes_stack.py::test_lockstep_runs_are_identical",
    "test_benchmarks.py::test_the_benchmark_over_dds_runs_to_its_table",
    "test_run_node.py",
)
LAUNCH = ("test_launch_hardware.py", "test_launch_simulation.py")
SLOW = (
    "test_architecture.py",
    "test_benchmarks.py",
    "test_compiled_step.py",
    "test_stack_when_late.py",
    "test_examples.py",
    "test_identification.py",
    "test_identification_lead_screw.py",
    "test_main_job.py",
    "test_margins.py",
    "test_mujoco_closed_loop.py",
    "test_quanser_board.py",
    "test_rates.py",
    "test_run_node.py",
    "test_evaluation_report_html.py",
)


def _listed(item, entries) -> bool:
    name = f"{item.path.name}::{item.name}"
    return any(name == entry or name.startswith(entry + "[") or item.path.name == entry for entry in entries)


def tiers_of(item) -> list[str]:
    """The tier markers of one collected test."""
    if _listed(item, LAUNCH):
        kind = "launch"
    elif "context" in getattr(item, "fixturenames", ()) or _listed(item, DDS):
        kind = "dds"
    else:
        kind = "unit"
    generated = getattr(getattr(item, "obj", None), "is_hypothesis_test", False)
    if not (generated or _listed(item, SLOW) or item.get_closest_marker("slow") is not None):
        return [kind]
    return ["slow"] if kind == "unit" else [kind, "slow"]  # a long test is never in the fast tier


def pytest_collection_modifyitems(config, items):
    for item in items:
        for tier in tiers_of(item):
            item.add_marker(tier)


class LaunchTestUnavailable(pytest.File):
    """A launch_testing file whose ROS 2 launch packages do not import: one skipped file."""

    reason = ""

    def collect(self):
        pytest.skip(self.reason)


@pytest.hookimpl(tryfirst=True)
def pytest_pycollect_makemodule(module_path, parent):
    """Skip a launch_testing file as a file when launch does not import. launch_testing's plugin
    imports every test file while collecting, and a skip raised by such an import (a module-level
    importorskip) skipped the whole folder, every other test included."""
    if module_path.name in LAUNCH:
        reason = ros_helpers.launch_unavailable()
        if reason:
            collector = LaunchTestUnavailable.from_parent(parent, path=module_path)
            collector.reason = reason
            return collector
    return None


def pytest_report_header(config):
    return (
        f"ROS: ROS_DOMAIN_ID={os.environ.get('ROS_DOMAIN_ID')} "
        f"RMW_IMPLEMENTATION={os.environ.get('RMW_IMPLEMENTATION')} "
        f"FASTDDS_DEFAULT_PROFILES_FILE={os.environ.get('FASTDDS_DEFAULT_PROFILES_FILE')}"
    )


def pytest_unconfigure(config):
    if _ROS_LOG_DIR is not None:
        shutil.rmtree(_ROS_LOG_DIR, ignore_errors=True)


@pytest.fixture
def context():
    """A fresh rclpy Context per test, so no test sees another's nodes or leftovers."""
    rclpy = pytest.importorskip("rclpy")
    from rclpy.context import Context

    ctx = Context()
    rclpy.init(context=ctx)
    try:
        yield ctx
    finally:
        rclpy.try_shutdown(context=ctx)


@pytest.fixture
def executor(context):
    from rclpy.executors import SingleThreadedExecutor

    ex = SingleThreadedExecutor(context=context)
    try:
        yield ex
    finally:
        ex.shutdown()


def in_ci() -> bool:
    """CI services set CI=true; there a test must fail where a developer's run would skip."""
    return os.environ.get("CI") == "true"


@pytest.fixture
def generation_sympy():
    """SymPy of the version the generated dynamics record, for the byte checks of the generated code.

    The generated text depends on the SymPy version (term order of the common subexpressions), so
    another version cannot confirm it. Outside CI that is a skip with both versions in the reason;
    in CI (CI=true) it is a failure, since CI must install the pinned version of requirements.txt.
    """
    from hexapod_control.model.generated import dynamics_terms

    wanted = dynamics_terms.SYMPY_VERSION
    try:
        import sympy
    except ImportError:
        installed = None
    else:
        installed = sympy.__version__
    if installed == wanted:
        return sympy
    message = (
        f"the generated dynamics were made with SymPy {wanted}, installed: {installed or 'none'}; "
        f"only SymPy {wanted} (pinned in requirements.txt) can check them"
    )
    if in_ci():
        pytest.fail(message + " (CI=true: install requirements.txt)", pytrace=False)
    pytest.skip(message + " (outside CI; CI=true fails here)")

