"""The compiled control cycle (generated/control_cycle.c) against the Python controllers.

Two controllers of each kind share one model: one runs the compiled cycle, the other the Python
code (``select_cycle("python")``, the reference). Fed the same measured states and references, they
must give the same outputs and leave the same warm start and integrator behind, cycle by cycle:
along the 6.5 trajectory, at jittered periods and across gaps, with saturation, with damped least
squares, and where the C code defers a cycle to the Python one (invalid input, FK continuation,
singular configurations).

Tolerances. The C forward kinematics does the Python one's operations in the same order: phi and
the pose came out bit for bit equal, but for the ZYX pitch, whose hypot (glibc's in C, CPython's
own in Python) differs by an ulp now and then (1.3e-16 rad). The position gains (1e5 1/s^2) turn
that into 9.1e-13 N on the computed-torque forces; J_A^-1 (LU against LAPACK) and the Jacobi SVD
against LAPACK's add round-off of 3e-14 N and 3.3e-16 in the conditioning. The bounds are about
three times the largest differences measured; the force bound is 1e-14 of the robot's force
limit (333 N), well within the required 1e-12.
"""

from __future__ import annotations

import math
import os
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import ros_environment

from hexapod_control import HexapodModel
from hexapod_control.control import compiled_cycle
from hexapod_control.control.controllers import CONTROLLER_NAMES, ControlStatus, make_controller
from hexapod_control.control.trajectories import HoldTrajectory, Reference, make_trajectory
from hexapod_control.model import compiled
from hexapod_control.model.parameters import default_parameters_path, load_parameters

FORCE_TOLERANCE = 3e-12  # [N]; 9.1e-13 N measured
KINEMATIC_TOLERANCE = 1e-15  # pose, pose error, phi [m, rad], conditionings, FK residual [m]; 3.3e-16 measured
INTEGRAL_TOLERANCE = 5e-18  # [m]; 1.2e-18 m measured after 3 s
JOINT_VELOCITY_TOLERANCE = 5e-16  # nu_d [m/s]; 1.8e-16 m/s measured
JOINT_VELOCITY_RELATIVE_TOLERANCE = 5e-15  # J_A^-1 of errors of pi rad (nu_d ~ 3 m/s): 1.7e-15 measured
# Errors of pi rad or 0.2 m: K_P turns them into terms of ~1e5 N that cancel to clamped forces of
# 333 N, with round-off relative to those terms (8.4e-11 N measured): the required 1e-12 of the
# force limit.
LARGE_ERROR_FORCE_TOLERANCE = 1e-12 * 333.0  # [N]
# About the median of the largest force per cycle along the trajectory: half the cycles clamp.
FORCE_LIMIT_CROSSED = {"double_loop": 7.0, "computed_torque": 14.0}  # [N]
TRAJECTORY_SECONDS = 3.0
TRAJECTORY_START = 2.0  # [s] past the start of the 6.5 trajectory, where the ramp moves the platform
SIMULATED_PLANT = "simulated_plant"


@pytest.fixture(scope="module")
def cycle_library():
    try:
        return compiled_cycle.cycle_library("c")
    except compiled.CompilationError as error:
        compiler = compiled.default_compiler()
        if compiled.installed_library_path() is None and (not compiler or shutil.which(compiler[0]) is None):
            pytest.skip(f"no installed library and no C compiler: {error}")
        raise  # a compiler is there but the generated C does not build: a real failure


def parameters(**changes):
    loaded = load_parameters(default_parameters_path("hexapod.yaml"))
    return loaded.replace(**changes) if changes else loaded


def pair(name, model, settings=None, gain_set="robot"):
    """(compiled, Python) controllers of one kind on one model."""
    compiled_controller = make_controller(name, model, settings, gain_set)
    python_controller = make_controller(name, model, settings, gain_set)
    assert compiled_controller.select_cycle("c") == "c"
    assert python_controller.select_cycle("python") == "python"
    return compiled_controller, python_controller


def tracking_states(model, trajectory, times, seed=0):
    """(q, qd) along the reference: IK of the pose and J_A^-1 xi_d_dot, perturbed by ~0.1 mm, ~1 mm/s."""
    rng = np.random.default_rng(seed)
    states = []
    for t in times:
        reference = trajectory.sample(t)
        ik = model.inverse_kinematics(reference.pose[:3], reference.pose[3:])
        jacobian = model.analytic_jacobian(ik.q, phi=ik.phi).analytic
        qd = np.linalg.solve(jacobian, reference.velocity)
        states.append((ik.q + rng.normal(0.0, 1e-4, 6), qd + rng.normal(0.0, 1e-3, 6)))
    return states


def assert_same_output(compiled_output, python_output, where="", force_tolerance=FORCE_TOLERANCE):
    assert compiled_output.status == python_output.status, where
    assert compiled_output.message == python_output.message, where
    assert compiled_output.t == python_output.t
    np.testing.assert_array_equal(compiled_output.saturated, python_output.saturated, err_msg=where)
    np.testing.assert_allclose(
        compiled_output.forces, python_output.forces, rtol=0, atol=force_tolerance, err_msg=where
    )
    for field in ("pose", "pose_error"):
        np.testing.assert_allclose(
            getattr(compiled_output, field), getattr(python_output, field), rtol=0, atol=KINEMATIC_TOLERANCE, err_msg=where
        )
    for field in (
        "position_error_norm",
        "orientation_error_norm",
        "jacobian_conditioning",
        "constraint_conditioning",
        "fk_residual",
    ):
        np.testing.assert_allclose(
            getattr(compiled_output, field), getattr(python_output, field), rtol=0, atol=KINEMATIC_TOLERANCE, err_msg=field
        )
    assert compiled_output.fk_iterations == python_output.fk_iterations, where


def assert_same_state(compiled_controller, python_controller):
    """The warm start and the integrator the two paths leave for the next cycle.

    After a compiled cycle, also the C code's own copy of them, which the next compiled cycle
    starts from without copying them again.
    """
    a, b = compiled_controller.kinematic_state, python_controller.kinematic_state
    cycle = compiled_controller.cycle
    if cycle.last_status in compiled_cycle.FINISHED_STATUSES:
        layout, state = cycle.library.state, cycle._state
        held = [a.last_q, a.last_phi, a.previous_q, a.previous_phi]
        assert [tuple(state[layout[name]]) for name in ("last_q", "last_phi", "previous_q", "previous_phi")] == held
        if compiled_controller.name == "double_loop":
            np.testing.assert_array_equal(state[layout["integral"]], compiled_controller.integral)
    for field in ("last_q", "previous_q"):
        assert getattr(a, field) == getattr(b, field)
    for field in ("last_phi", "previous_phi"):
        np.testing.assert_allclose(getattr(a, field), getattr(b, field), rtol=0, atol=KINEMATIC_TOLERANCE)
    if compiled_controller.name == "double_loop":
        np.testing.assert_allclose(compiled_controller.integral, python_controller.integral, rtol=0, atol=INTEGRAL_TOLERANCE)
        np.testing.assert_allclose(
            compiled_controller.desired_joint_velocity,
            python_controller.desired_joint_velocity,
            rtol=JOINT_VELOCITY_RELATIVE_TOLERANCE,
            atol=JOINT_VELOCITY_TOLERANCE,
        )


def run_side_by_side(controllers, model, trajectory, times, states):
    compiled_controller, python_controller = controllers
    for controller in controllers:
        controller.reset(times[0], *states[0])
    statuses = []
    for t, (q, qd) in zip(times, states):
        reference = trajectory.sample(t)
        compiled_output = compiled_controller.update(t, q, qd, reference)
        python_output = python_controller.update(t, q, qd, reference)
        assert_same_output(compiled_output, python_output, where=f"t = {t}")
        assert_same_state(compiled_controller, python_controller)
        statuses.append(python_output.status)
    return statuses


# ------------------------------------------------------------------------------------ regular cycles
@pytest.mark.slow
@pytest.mark.parametrize("name", CONTROLLER_NAMES)
def test_equal_to_python_along_the_trajectory(cycle_library, name):
    model = HexapodModel(parameters())
    controllers = pair(name, model)
    trajectory = make_trajectory("operational_space", model)
    times = TRAJECTORY_START + np.arange(round(TRAJECTORY_SECONDS / controllers[0].period)) * controllers[0].period
    statuses = run_side_by_side(controllers, model, trajectory, times, tracking_states(model, trajectory, times))
    assert set(statuses) == {ControlStatus.OK}
    cycle = controllers[0].cycle
    assert cycle.finished == len(times) and not cycle.deferred  # every cycle was the C code's


@pytest.mark.slow
@pytest.mark.parametrize("name", CONTROLLER_NAMES)
def test_equal_to_python_at_jittered_periods(cycle_library, name):
    """Joint states 0.5-1.5 periods apart, and gaps of 5-30 periods (states dropped in a burst):
    the double loop integrates over each actual spacing, bounded by its longest valid period."""
    model = HexapodModel(parameters())
    controllers = pair(name, model)
    trajectory = make_trajectory("operational_space", model)
    rng = np.random.default_rng(3)
    spacings = controllers[0].period * rng.uniform(0.5, 1.5, 1000)
    spacings[rng.choice(spacings.size, 20, replace=False)] *= rng.uniform(5.0, 30.0, 20)
    times = TRAJECTORY_START + np.concatenate(([0.0], np.cumsum(spacings)))
    statuses = run_side_by_side(controllers, model, trajectory, times, tracking_states(model, trajectory, times, seed=4))
    assert set(statuses) == {ControlStatus.OK}
    assert controllers[0].cycle.finished == len(times)


@pytest.mark.slow
@pytest.mark.parametrize("name", CONTROLLER_NAMES)
def test_equal_to_python_while_saturated(cycle_library, name):
    """A force limit half the cycles cross: clamping and, for the double loop, the conditional
    integration stop and restart alike."""
    limit = FORCE_LIMIT_CROSSED[name]
    model = HexapodModel(parameters(limits={"actuator_force_max": limit}, safety={"hold_force_max": limit}))
    controllers = pair(name, model)
    trajectory = make_trajectory("operational_space", model)
    times = TRAJECTORY_START + np.arange(1000) * controllers[0].period
    statuses = run_side_by_side(controllers, model, trajectory, times, tracking_states(model, trajectory, times, seed=1))
    assert statuses.count(ControlStatus.SATURATED) > 100 and statuses.count(ControlStatus.OK) > 100
    assert controllers[0].cycle.finished == len(times)


@pytest.mark.slow
@pytest.mark.parametrize("name", CONTROLLER_NAMES)
def test_equal_to_python_with_damped_least_squares(cycle_library, name):
    """damping_threshold above the workspace's conditioning (0.13 at home): every cycle damped in C."""
    model = HexapodModel(parameters(controllers={"singularity": {"damping_threshold": 0.5}}))
    controllers = pair(name, model)
    trajectory = make_trajectory("operational_space", model)
    times = TRAJECTORY_START + np.arange(1000) * controllers[0].period
    statuses = run_side_by_side(controllers, model, trajectory, times, tracking_states(model, trajectory, times, seed=2))
    assert set(statuses) == {ControlStatus.NEAR_SINGULAR}
    assert controllers[0].cycle.finished == len(times)


@pytest.mark.parametrize("name", CONTROLLER_NAMES)
def test_equal_to_python_near_the_stretched_legs_singularity(cycle_library, name):
    """The nominal thresholds, where J_A really loses rank (legs almost stretched, as test_controllers)."""
    model = HexapodModel(parameters())
    controllers = pair(name, model, gain_set=SIMULATED_PLANT)
    pose = np.array([0.0, 0.0, 0.4672, 0.0, 0.0, 0.0])
    q = model.inverse_kinematics(pose[:3], pose[3:], check_limits=False).q
    reference = HoldTrajectory(pose - [0.0, 0.0, 0.002, 0.0, 0.0, 0.0]).sample(0.0)
    outputs = []
    for controller in controllers:
        controller.reset(0.0, q, np.zeros(6))
        outputs.append(controller.update(0.0, q, np.full(6, 1e-3), reference))
    assert outputs[1].status == ControlStatus.NEAR_SINGULAR and controllers[0].cycle.last_status == "near_singular"
    assert_same_output(*outputs)


def test_euler_errors_wrap_alike(cycle_library):
    """wrap_angle's numpy remainder, in C: reference angles a multiple of 2 pi away, and near +-pi."""
    model = HexapodModel(parameters())
    compiled_controller, python_controller = pair("computed_torque", model)
    q = model.home_q + np.array([0.01, -0.02, 0.015, 0.0, -0.01, 0.02])
    pose = model.forward_kinematics(q).pose
    offsets = [
        [2 * math.pi - 1e-3, -2 * math.pi + 2e-3, 4 * math.pi],
        [math.pi, -math.pi, 3 * math.pi],
        [math.pi - 1e-12, -math.pi + 1e-12, math.pi + 1e-12],
        [-7 * math.pi, 1e-300, -0.0],
    ]
    for offset in offsets:
        reference = HoldTrajectory(pose + np.array([0.0, 0.0, 0.0, *offset])).sample(0.0)
        outputs = []
        for controller in (compiled_controller, python_controller):
            controller.reset(0.0, q, np.zeros(6))
            outputs.append(controller.update(0.0, q, np.zeros(6), reference))
        assert compiled_controller.cycle.last_status in compiled_cycle.FINISHED_STATUSES
        assert_same_output(*outputs, where=str(offset), force_tolerance=LARGE_ERROR_FORCE_TOLERANCE)


# ------------------------------------------------------------------------------------ deferred cycles
@pytest.mark.parametrize("name", CONTROLLER_NAMES)
def test_deferred_cycles_give_the_python_output(cycle_library, name):
    """Every safe output and the FK continuation are the Python code's, then C carries on from its state."""
    model = HexapodModel(parameters())
    controllers = pair(name, model, gain_set=SIMULATED_PLANT)
    q, qd = model.home_q, np.zeros(6)
    reference = make_trajectory("operational_space", model).sample(1.0)
    two_leg_lengths = 2 * model.parameters.geometry.leg_length
    jumped = q + 0.2 * np.array([1, -1, 0.5, 0, -0.7, 0.3])
    cases = [
        # (t, q, qd, reference, the C status that defers, the Python status)
        (0.001, np.array([np.nan, *q[1:]]), qd, reference, "invalid_input", ControlStatus.INVALID_INPUT),
        (0.001, q, np.array([0, 0, np.inf, 0, 0, 0]), reference, "invalid_input", ControlStatus.INVALID_INPUT),
        (0.001, q[:5], qd, reference, "invalid_input", ControlStatus.INVALID_INPUT),
        (0.001, q.reshape(6, 1), qd, reference, "invalid_input", ControlStatus.INVALID_INPUT),
        (0.001, ["a"] * 6, qd, reference, "invalid_input", ControlStatus.INVALID_INPUT),
        (math.inf, q, qd, reference, "invalid_input", ControlStatus.INVALID_INPUT),
        (0.001, q, qd, Reference(1.0, np.full(6, np.nan), np.zeros(6), np.zeros(6)), "invalid_input", ControlStatus.INVALID_INPUT),
        (0.001, q, qd, None, "invalid_input", ControlStatus.INVALID_INPUT),
        (0.001, np.array([two_leg_lengths / 2, two_leg_lengths / 2, *q[2:]]), qd, reference, "cannot_assemble",
         ControlStatus.KINEMATICS_FAILURE),
        # 0.2 m away from the warm start in one cycle: Newton from the prediction fails, Python re-tracks.
        (0.002, jumped, qd, reference, "fk_needs_continuation", ControlStatus.SATURATED),
        (0.003, jumped + 1e-4, qd, reference, "saturated", None),  # C again, from the state Python left
        (0.004, list(jumped + 2e-4), list(qd), reference, "saturated", None),  # lists are regular inputs too
    ]
    for controller in controllers:
        controller.reset(0.0, q, qd)
        controller.update(0.0, q, qd, reference)
    for t, bad_q, bad_qd, bad_reference, c_status, python_status in cases:
        compiled_output = controllers[0].update(t, bad_q, bad_qd, bad_reference)
        python_output = controllers[1].update(t, bad_q, bad_qd, bad_reference)
        assert controllers[0].cycle.last_status == c_status
        if python_status is not None:
            assert python_output.status == python_status, python_output.message
        if python_output.safe_output:
            assert _same_safe_output(compiled_output, python_output)
        else:
            assert_same_output(compiled_output, python_output, c_status, LARGE_ERROR_FORCE_TOLERANCE)
        assert_same_state(*controllers)


def _same_safe_output(a, b) -> bool:
    """Field by field, NaN equal to NaN (the diagnostics a safe output could not compute)."""
    for field in a.__dataclass_fields__:
        x, y = getattr(a, field), getattr(b, field)
        if isinstance(x, np.ndarray) or isinstance(x, float):
            np.testing.assert_array_equal(x, y, err_msg=field)
        else:
            assert x == y, field
    return True


@pytest.mark.parametrize("name", CONTROLLER_NAMES)
def test_singular_stops_are_deferred(cycle_library, name):
    """Below the stop thresholds the C code defers and the output is the Python safe output."""
    base = parameters()
    model = HexapodModel(base)
    q = model.home_q + np.array([0.01, -0.02, 0.015, 0.0, -0.01, 0.02])
    conditioning = model.analytic_jacobian(q).jacobian_conditioning
    reference = HoldTrajectory(model.forward_kinematics(q).pose).sample(0.0)
    stops = {
        "conditioning_stop": {"stop_threshold": 1.01 * conditioning, "damping_threshold": 0.5},
        "constraint_stop": {"constraint_stop_threshold": 0.99},
    }
    for c_status, rule in stops.items():
        settings = base.replace(controllers={"singularity": rule}).controllers
        controllers = pair(name, model, settings)
        outputs = []
        for controller in controllers:
            controller.reset(0.0, q, np.zeros(6))
            outputs.append(controller.update(0.0, q, np.zeros(6), reference))
        assert controllers[0].cycle.last_status == c_status
        assert outputs[1].status == ControlStatus.SINGULAR and _same_safe_output(*outputs)
        assert_same_state(*controllers)


# ------------------------------------------------------------------------------------ selection
def run_python(code, **environment):
    env = dict(os.environ, **environment)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ros_environment.REPO_ROOT), env.get("PYTHONPATH")]))
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], env=env, capture_output=True, text=True, timeout=300, check=False
    )


def test_the_backend_is_chosen_when_the_model_is_built_and_the_cycle_follows_it(cycle_library, monkeypatch):
    """Two models of one process on different dynamics backends: each computes with its own, and
    their controllers' "auto" cycle follows it; an explicit choice is taken as it is."""
    monkeypatch.delenv(compiled.BACKEND_VARIABLE, raising=False)
    monkeypatch.delenv(compiled_cycle.CYCLE_VARIABLE, raising=False)
    in_python = HexapodModel(load_parameters(), backend="python")
    in_c = HexapodModel(load_parameters(), backend="c")
    assert (in_python.backend, in_c.backend) == ("python", "c")
    assert in_python.dynamics.terms is compiled.python_terms and in_c.dynamics.terms.LIBRARY_PATH
    q, qd, qdd = in_python.home_q + 0.01, np.full(6, 0.1), np.full(6, -0.2)
    np.testing.assert_allclose(in_c.inverse_dynamics(q, qd, qdd), in_python.inverse_dynamics(q, qd, qdd), rtol=1e-12)
    for name in CONTROLLER_NAMES:
        assert make_controller(name, in_python).cycle_backend == "python"
        assert make_controller(name, in_c).cycle_backend == "c"
        controller = make_controller(name, in_python)
        assert controller.select_cycle("c") == "c"
    with pytest.raises(ValueError, match="HEXAPOD_DYNAMICS_BACKEND='fortran'"):
        HexapodModel(load_parameters(), backend="fortran")


SELECTION_SCRIPT = """
    from hexapod_control import HexapodModel
    from hexapod_control.control.controllers import make_controller
    print(make_controller("computed_torque", HexapodModel.from_yaml()).cycle_backend)
"""


@pytest.mark.slow
@pytest.mark.parametrize(
    ("environment", "expected"),
    [
        ({"HEXAPOD_CONTROL_CYCLE": "python"}, "python"),
        ({"HEXAPOD_CONTROL_CYCLE": "c"}, "c"),
        ({"HEXAPOD_CONTROL_CYCLE": ""}, "c"),
        ({"HEXAPOD_CONTROL_CYCLE": "auto", "HEXAPOD_DYNAMICS_BACKEND": "python"}, "python"),
    ],
)
def test_the_environment_selects_the_cycle(cycle_library, environment, expected):
    result = run_python(SELECTION_SCRIPT, **environment)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == [expected]


@pytest.mark.slow
def test_an_unknown_cycle_choice_is_rejected():
    with pytest.raises(ValueError, match="HEXAPOD_CONTROL_CYCLE='fortran'"):
        compiled_cycle.cycle_library("fortran")
    result = run_python(SELECTION_SCRIPT, HEXAPOD_CONTROL_CYCLE="fortran")
    assert result.returncode != 0 and "HEXAPOD_CONTROL_CYCLE='fortran'" in result.stderr
