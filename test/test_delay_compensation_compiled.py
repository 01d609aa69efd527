"""The delay compensation's compiled core (control/compiled_prediction.py) against its NumPy code.

Two compensated controllers of one kind share one model: one runs the numeric core in C
(``select_core("c")``), the other the NumPy code (``select_core("python")``, the reference). Fed the
same states and the same forces in flight, they must give the same measured kinematics, applied
forces, predictions and outputs, and leave the same warm start behind; every call the C code does
not finish must give what the NumPy code gives, raise included.

Tolerances. Rigid bodies: the C code does the NumPy code's operations in the same order: phi,
the predictions and the forces came out bit for bit equal, the pose within an ulp (1.5e-16 rad, the
ZYX pitch's hypot: glibc's in C, CPython's own). With the drives, NumPy's SIMD tanh differs from
the C library's by an ulp now and then, which 1 - tanh^2 near 1 amplifies, and the LU solve
differs from LAPACK's by round-off: 2.1e-14 N on the applied forces, 9.7e-17 m/s on the predicted
velocities (the positions equal), 1.2e-13 N on the law's forces at the predicted state. The bounds
are the required 1e-12 N on forces and, on states, 1e-15 of their scale (0.3 m, 1 m/s).
"""

from __future__ import annotations

import shutil

import numpy as np
import pytest
from delay_runs import FAST_RAMP

from hexapod_control import HexapodModel
from hexapod_control.control import compiled_prediction
from hexapod_control.control.controllers import CONTROLLER_NAMES, make_controller
from hexapod_control.control.delay_compensation import DelayCompensatedController
from hexapod_control.control.trajectories import make_trajectory
from hexapod_control.errors import AssemblyError, AssemblyModeJumpError
from hexapod_control.model import compiled
from hexapod_control.model.parameters import default_parameters_path, load_parameters
from hexapod_control.simulation import make_plant
from hexapod_control.simulation.delay import DelayedPlant

FORCE_TOLERANCE = 1e-12  # [N]
POSITION_TOLERANCE = 1e-15 * 0.3  # [m, rad]: the robot's scale, 0.3 m
VELOCITY_TOLERANCE = 1e-15  # [m/s]
DRIVES = load_parameters(default_parameters_path("hexapod_actuators.yaml")).replace(
    trajectories={"operational_space": {"ramp_rate": 1.0}}
)
PARAMETER_SETS = {"rigid": FAST_RAMP, "drives": DRIVES}
TRAJECTORY_START = 1.0  # [s] into the fast ramp: the platform moves
STEPS = 150
FORCE_SPREAD = 40.0  # [N] of the forces in flight around the law's own


@pytest.fixture(scope="module", autouse=True)
def prediction_library():
    try:
        return compiled_prediction.prediction_library("c")
    except compiled.CompilationError as error:
        compiler = compiled.default_compiler()
        if compiled.installed_library_path() is None and (not compiler or shutil.which(compiler[0]) is None):
            pytest.skip(f"no installed library and no C compiler: {error}")
        raise  # a compiler is there but the generated C does not build: a real failure


class FixedDelay:
    """The estimator's interface, holding ``periods``: records each applied force it is given."""

    def __init__(self, periods: int, max_periods: int = 3):
        self.periods, self.max_periods = periods, max_periods
        self.applied: list[np.ndarray] = []

    def update(self, applied, candidates, period):
        self.applied.append(np.array(applied))
        return self.periods


def pair(parameters, delay: int, name: str = "computed_torque"):
    """(compiled core, NumPy core) compensated controllers of one kind on one model, delay fixed."""
    model = HexapodModel(parameters)
    controllers = []
    for core in ("c", "python"):
        law = make_controller(name, model, gain_set="simulated_plant")
        controller = DelayCompensatedController(law, model, delay, estimator=FixedDelay(delay))
        assert controller.select_core(core) == core
        controllers.append(controller)
    return model, controllers


def assert_same_step(compiled_controller, python_controller, compiled_output, python_output, where):
    np.testing.assert_allclose(compiled_output.forces, python_output.forces, rtol=0, atol=FORCE_TOLERANCE, err_msg=where)
    assert compiled_output.status == python_output.status and compiled_output.message == python_output.message, where
    np.testing.assert_allclose(compiled_output.pose, python_output.pose, rtol=0, atol=POSITION_TOLERANCE, err_msg=where)
    a, b = compiled_controller.measured_state, python_controller.measured_state
    assert (a.last_q, a.previous_q) == (b.last_q, b.previous_q), where
    np.testing.assert_allclose(a.last_phi + a.previous_phi, b.last_phi + b.previous_phi, rtol=0, atol=POSITION_TOLERANCE)
    if python_controller.prediction is None:
        assert compiled_controller.prediction is None, where
    else:
        np.testing.assert_allclose(
            compiled_controller.prediction[0], python_controller.prediction[0], rtol=0, atol=POSITION_TOLERANCE, err_msg=where
        )
        np.testing.assert_allclose(
            compiled_controller.prediction[1], python_controller.prediction[1], rtol=0, atol=VELOCITY_TOLERANCE, err_msg=where
        )
    compiled_applied, python_applied = compiled_controller.estimator.applied, python_controller.estimator.applied
    assert len(compiled_applied) == len(python_applied), where
    if python_applied:
        np.testing.assert_allclose(compiled_applied[-1], python_applied[-1], rtol=0, atol=FORCE_TOLERANCE, err_msg=where)


def trajectory_states(model, times, rng):
    """(q, qd) along the 6.5 trajectory: IK of the pose, J_A^-1 xi_d_dot, ~0.1 mm and ~1 mm/s off."""
    trajectory = make_trajectory("operational_space", model)
    states = []
    for t in times:
        reference = trajectory.sample(t)
        ik = model.inverse_kinematics(reference.pose[:3], reference.pose[3:])
        qd = np.linalg.solve(model.analytic_jacobian(ik.q, phi=ik.phi).analytic, reference.velocity)
        states.append((ik.q + rng.normal(0.0, 1e-4, 6), qd + rng.normal(0.0, 1e-3, 6)))
    return trajectory, states


def random_states(model, count, rng):
    """Positions within ~1 cm of home, each one a jump for the warm start; velocities a random walk
    from ~5 cm/s by ~2 mm/s per state (accelerations of a few m/s^2, as the robot's)."""
    velocities = rng.normal(0.0, 0.05, 6) + np.cumsum(rng.normal(0.0, 2e-3, (count, 6)), axis=0)
    return [(model.home_q + rng.normal(0.0, 0.01, 6), qd) for qd in velocities]


def run_side_by_side(controllers, times, states, reference_at, rng):
    """Both controllers answer each state; then both are told the same forces were sent (the law's
    answer plus a spread, as a supervisor or the drives' clamp would change it)."""
    compiled_controller, python_controller = controllers
    for controller in controllers:
        controller.reset(times[0], *states[0])
    for k, (t, (q, qd)) in enumerate(zip(times, states)):
        reference = reference_at(t)
        compiled_output = compiled_controller.update(t, q, qd, reference)
        python_output = python_controller.update(t, q, qd, reference)
        assert_same_step(compiled_controller, python_controller, compiled_output, python_output, f"step {k}, t = {t}")
        sent = python_output.forces + rng.normal(0.0, FORCE_SPREAD, 6)
        for controller in controllers:
            controller.commanded(t, sent)


@pytest.mark.slow
@pytest.mark.parametrize("drives", PARAMETER_SETS)
@pytest.mark.parametrize("delay", [1, 2, 3])
def test_along_the_trajectory_the_c_core_answers_as_the_numpy_code(drives, delay):
    model, controllers = pair(PARAMETER_SETS[drives], delay)
    rng = np.random.default_rng(delay)
    times = TRAJECTORY_START + np.arange(STEPS) * model.parameters.controllers.period
    trajectory, states = trajectory_states(model, times, rng)
    run_side_by_side(controllers, times, states, trajectory.sample, rng)
    core = controllers[0].core
    # Every call ran in C (the first state has no previous one to estimate from).
    assert core.finished == {"measure": STEPS, "applied_force": STEPS - 1, "predict": STEPS} and not core.deferred


@pytest.mark.slow
@pytest.mark.parametrize("drives", PARAMETER_SETS)
@pytest.mark.parametrize("delay", [1, 2, 3])
def test_at_random_states_near_home_the_c_core_answers_as_the_numpy_code(drives, delay):
    model, controllers = pair(PARAMETER_SETS[drives], delay, "double_loop")
    rng = np.random.default_rng(10 + delay)
    times = np.arange(STEPS) * model.parameters.controllers.period
    reference = make_trajectory("operational_space", model).sample(0.0)
    run_side_by_side(controllers, times, random_states(model, STEPS, rng), lambda t: reference, rng)
    core = controllers[0].core
    assert core.finished["predict"] == STEPS and core.finished["applied_force"] == STEPS - 1
    # The warm start of the measured FK is a step of ~1 cm behind: most calls converge from it, a
    # few need the continuation, which the NumPy code runs.
    assert core.finished["measure"] + core.deferred["measure", "fk_needs_continuation"] == STEPS
    assert core.finished["measure"] > STEPS // 2


def test_the_applied_force_is_the_force_the_prediction_stepped_with():
    """Round trip: one predicted period under a force F, then the estimator's applied force of that
    motion is F again (the implicit friction included), to round-off of the terms (~100 N)."""
    model = HexapodModel(DRIVES)
    core = compiled_prediction.attach(model, 1, "c")
    rng = np.random.default_rng(4)
    period = model.parameters.controllers.period
    for q, qd in random_states(model, 20, rng):
        phi = model.forward_kinematics(q).phi
        force = rng.normal(0.0, 100.0, 6)
        _, qd_after = core.predict(q, qd, phi, [force], period)
        np.testing.assert_allclose(core.applied_force(q, qd, phi, qd_after, period), force, rtol=0, atol=1e-10)


# ------------------------------------------------------------------------------------------ deferred calls
def test_a_state_that_cannot_assemble_is_answered_as_the_numpy_code_answers_it():
    model, controllers = pair(FAST_RAMP, 2)
    reference = make_trajectory("operational_space", model).sample(0.0)
    for controller in controllers:
        controller.reset(0.0, model.home_q, np.zeros(6))
    stretched = model.home_q + 0.5  # every side wider than its legs span
    with pytest.raises(AssemblyError):
        model.forward_kinematics(stretched)
    compiled_output, python_output = (c.update(0.0, stretched, np.zeros(6), reference) for c in controllers)
    assert compiled_output.safe_output and compiled_output.message == python_output.message
    np.testing.assert_array_equal(compiled_output.forces, python_output.forces)
    assert controllers[0].core.deferred == {("measure", "cannot_assemble"): 1}


def test_a_warm_start_far_from_the_state_continues_in_numpy():
    """A measured FK whose warm start lies across a branch jump: the NumPy code re-tracks it."""
    model, controllers = pair(FAST_RAMP, 1)
    reference = make_trajectory("operational_space", model).sample(0.0)
    q = model.inverse_kinematics(reference.pose[:3] + [0.01, 0.0, 0.0], reference.pose[3:]).q
    for controller in controllers:
        controller.reset(0.0, model.home_q, np.zeros(6))
        state = controller.measured_state
        state.last_phi = state.previous_phi = tuple(np.array(state.home_phi) + 0.7)  # another branch's guess
    compiled_output, python_output = (c.update(0.0, q, np.zeros(6), reference) for c in controllers)
    assert_same_step(*controllers, compiled_output, python_output, "far warm start")
    assert controllers[0].core.deferred == {("measure", "fk_needs_continuation"): 1}
    assert controllers[0].core.finished["predict"] == 1


def test_a_prediction_from_a_far_guess_raises_as_the_numpy_code_does():
    """_predict's solve_passive takes the last phi as an explicit guess: a solution across a branch
    jump from it is an error in both (the controller then acts on the measured state)."""
    model, (compiled_controller, python_controller) = pair(FAST_RAMP, 1)
    q, qd = model.home_q, np.zeros(6)
    far = np.array(model.kinematics.home_phi) + 0.7
    for controller in (compiled_controller, python_controller):
        with pytest.raises(AssemblyModeJumpError):
            controller._predict(0.0, q, qd, far, model.parameters.controllers.period, controller.delay_periods)
    assert compiled_controller.core.deferred == {("predict", "fk_needs_continuation"): 1}


def test_a_prediction_leaving_the_workspace_turns_the_compensation_off_as_in_numpy():
    """Joint states 0.1 s apart: three periods of 3 m/s carry side 1 beyond the span of its legs."""
    model, controllers = pair(FAST_RAMP, 3)
    reference = make_trajectory("operational_space", model).sample(0.0)
    for controller in controllers:
        controller.reset(0.0, model.home_q, np.zeros(6))
    for t, qd in ((0.0, np.zeros(6)), (0.1, np.array([3.0, 3.0, 0.0, 0.0, 0.0, 0.0]))):
        compiled_output, python_output = (c.update(t, model.home_q, qd, reference) for c in controllers)
        assert_same_step(*controllers, compiled_output, python_output, f"t = {t}")
    assert "delay compensation off for this step: q: side" in python_output.message
    assert controllers[0].core.deferred == {("predict", "cannot_assemble"): 1}


def test_forces_in_flight_of_the_wrong_size_are_left_to_the_numpy_code():
    model, (compiled_controller, _) = pair(FAST_RAMP, 1)
    core = compiled_controller.core
    phi = model.kinematics.home_phi
    assert core.predict(model.home_q, np.zeros(6), phi, [np.zeros(5)], 0.001) is None
    assert core.predict(model.home_q, np.zeros(6), phi, [np.full(6, np.nan)], 0.001) is None
    assert core.deferred == {("predict", "invalid_input"): 2}


def test_the_python_choice_runs_no_c():
    _, (_, python_controller) = pair(FAST_RAMP, 1)
    assert python_controller.core is None
    assert compiled_prediction.prediction_library("python") is None


def test_drives_with_the_lead_screw_terms_run_the_numpy_core():
    """The C code has the symmetric drive law only: a direction-dependent Coulomb term is NumPy's."""
    asymmetric = DRIVES.replace(actuators={"coulomb_asymmetry": [1.0] * 6})
    def compensated(parameters):
        return make_controller("computed_torque", HexapodModel(parameters),
                               delay_compensation=parameters.controllers.delay_compensation)

    assert compensated(asymmetric).select_core("c") == "python"
    assert compensated(DRIVES).select_core("c") == "c"


# ------------------------------------------------------------------------------------------ closed loop
@pytest.mark.slow
@pytest.mark.parametrize("drives", PARAMETER_SETS)
@pytest.mark.parametrize("controller_name", CONTROLLER_NAMES)
def test_a_closed_loop_with_the_c_core_is_the_numpy_one(drives, controller_name):
    """Each core in its own closed loop, on its own plant 2 periods late with jitter and lost
    commands (the same random sequence): the same forces, step by step, and the estimator moving."""
    parameters = PARAMETER_SETS[drives]
    model = HexapodModel(parameters)
    runs = []
    for core in ("c", "python"):
        plant = DelayedPlant(make_plant("embedded", parameters), 2, 1.0, 0.05, seed=3)
        controller = make_controller(controller_name, model, gain_set="simulated_plant",
                                     delay_compensation=parameters.controllers.delay_compensation)
        assert controller.select_core(core) == core
        controller.reset(0.0, plant.joint_positions(), plant.joint_velocities())
        runs.append((plant, controller, []))
    trajectory = make_trajectory("operational_space", model)
    for _ in range(400):
        for plant, controller, outputs in runs:
            t = plant.time
            output = controller.update(t, plant.joint_positions(), plant.joint_velocities(), trajectory.sample(t))
            outputs.append((output.forces, controller.delay_periods))
            plant.apply_forces(output.forces)
            plant.step()
    (_, compiled_controller, compiled_outputs), (_, _, python_outputs) = runs
    np.testing.assert_allclose([f for f, _ in compiled_outputs], [f for f, _ in python_outputs], rtol=0, atol=FORCE_TOLERANCE)
    delays = [d for _, d in python_outputs]
    assert [d for _, d in compiled_outputs] == delays and len(set(delays)) > 1
    assert not compiled_controller.core.deferred
