"""Control rates other than ``controllers.rate``: each gain set's ``valid_rates`` and the actual period.

* The shipped ranges are re-derived as config/hexapod.yaml says they were found: the linearised
  loop of control/margins.py (delay compensated as configured) swept over the rate on the plant each
  gain set is for, its lowest stable rate times RATE_MARGIN, rounded up to ROUNDING; stable at the
  rates sampled up to max and beyond (the high end is the sweep's top, not a stability limit),
  unstable below the lowest stable rate (the low end is not arbitrary).
* The nonlinear loop confirms the low end: 10 % below the lowest stable rate it fails, 10 % above
  it holds (as test_actuators.py does for the thesis gains against the reflected inertia).
* Refusals: construction at a ``controllers.rate`` outside; arming at a measured joint-state rate
  outside; a rate drifting outside while armed (a HOLD fault); a HOLD damper unstable at the
  lowest valid rate, its bound checked against the eigenvalues of the delayed damper.
* The double loop's integral over uneven periods against the sum worked out by hand, and loops
  at rates other than 1 kHz that track.
"""

import functools
import math

import numpy as np
import pytest
from scipy.optimize import brentq

from hexapod_control import HexapodModel, LockstepLoop, make_plant, make_trajectory
from hexapod_control.control import compiled_cycle, margins
from hexapod_control.control.controllers import make_controller
from hexapod_control.control.loop import ControlLoop
from hexapod_control.control.safety import (
    RATE_DROP_SPAN_S,
    RATE_KNOWN_SPACINGS,
    RATE_TOLERANCE,
    RATE_WINDOW,
    Action,
    SupervisorState,
    hold_damping_bound,
)
from hexapod_control.control.stamp_period import StampPeriod
from hexapod_control.control.trajectories import HoldTrajectory, home_pose
from hexapod_control.errors import ParameterError
from hexapod_control.model.parameters import default_parameters_path, load_parameters
from hexapod_control.simulation.delay import DelayedPlant

RIGID = load_parameters(default_parameters_path("hexapod.yaml"))
# The robot's gains are for a plant with its drives. Coulomb friction is left out, as for the YAML's
# ranges: at rest its slope F_c / v_s (7500 N*s/m) would damp the linearised loop, a moving slider
# has none of it.
DRIVES = load_parameters(default_parameters_path("hexapod_actuators.yaml")).replace(actuators={"coulomb_friction": 0.0})
# (controller, gain set) -> the plants its range was found on (computed torque: the stricter of both).
PLANTS = {
    ("double_loop", "robot"): (DRIVES,),
    ("double_loop", "simulated_plant"): (RIGID,),
    ("computed_torque", "robot"): (RIGID, DRIVES),
}
# How the YAML's ranges were chosen: min = RATE_MARGIN x the lowest stable rate, rounded up to ROUNDING.
RATE_MARGIN = 1.5
ROUNDING = 50.0  # [Hz]
SWEEP_TOP = 10.0  # max = this x controllers.rate, the top of the sweep
SAMPLED_RATES = 12  # geometrically spaced from min to max
NAMES = RIGID.ros.joint_names


# ------------------------------------------------------------------------------------------ linearised loop
@functools.cache
def _linearised(parameters, controller, gain_set):
    model = HexapodModel(parameters)
    return margins.linearised_law(model, controller, gain_set), margins.linearised_plant(model)


def spectral_radius(parameters, controller, gain_set, rate):
    """Of the loop linearised at home at ``rate``, with the configured delay compensation."""
    compensation = parameters.controllers.delay_compensation
    assert compensation.predictor == "model"
    law, plant = _linearised(parameters, controller, gain_set)
    a, _ = margins.closed_loop(law, plant, plant, 1.0 / rate, compensation.delay_periods, compensated=True)
    return margins.spectral_radius(a)


@functools.cache
def lowest_stable_rate(parameters, controller, gain_set):
    """The rate [Hz] where the linearised loop turns stable, bracketed below the range's min / RATE_MARGIN."""
    _, rates = parameters.controllers.valid_rates(controller, gain_set)
    low, high = rates.min / (2.0 * RATE_MARGIN), rates.min / RATE_MARGIN
    assert spectral_radius(parameters, controller, gain_set, low) > 1.0
    assert spectral_radius(parameters, controller, gain_set, high) < 1.0, "the range's min lacks its margin"
    return brentq(lambda rate: spectral_radius(parameters, controller, gain_set, rate) - 1.0, low, high, xtol=1e-3)


@pytest.mark.parametrize("file", ["hexapod.yaml", "hexapod_actuators.yaml", "hexapod_validation.yaml"])
@pytest.mark.parametrize(("controller", "gain_set"), list(PLANTS))
def test_every_shipped_file_runs_every_gain_set_at_its_rate(file, controller, gain_set):
    parameters = load_parameters(default_parameters_path(file))
    _, rates = parameters.controllers.valid_rates(controller, gain_set)
    assert parameters.controllers.rate in rates
    ControlLoop(HexapodModel(parameters), controller, gain_set)  # refuses nothing: rate and HOLD damper fit


@pytest.mark.parametrize(("controller", "gain_set"), list(PLANTS))
def test_each_range_starts_a_margin_above_the_lowest_stable_rate(controller, gain_set):
    _, rates = RIGID.controllers.valid_rates(controller, gain_set)
    lowest = max(lowest_stable_rate(plant, controller, gain_set) for plant in PLANTS[controller, gain_set])
    print(f"{controller} ({gain_set}): stable from {lowest:.1f} Hz; valid_rates {rates}")
    assert rates.min == math.ceil(RATE_MARGIN * lowest / ROUNDING) * ROUNDING
    for plant in PLANTS[controller, gain_set]:
        for rate in np.geomspace(rates.min, rates.max, SAMPLED_RATES):
            assert spectral_radius(plant, controller, gain_set, rate) < 1.0, rate
        for factor in (0.5, 0.9, 0.99):  # unstable below: the low end is a stability limit
            rate = factor * lowest_stable_rate(plant, controller, gain_set)
            assert spectral_radius(plant, controller, gain_set, rate) > 1.0, (factor, rate)
        # The high end is not: the sampled loop tends to the continuous one, stable at twice max too.
        assert spectral_radius(plant, controller, gain_set, 2.0 * rates.max) < 1.0
    assert rates.max == SWEEP_TOP * RIGID.controllers.rate


# ------------------------------------------------------------------------------------------ nonlinear loop
# The embedded plant integrated finely, close to the continuous plant margins.py samples exactly
# (with one substep the predictor's Euler step is the plant's own, and computed torque holds lower).
FINE_SUBSTEPS = 20
CONFIRMATION_SECONDS = 1.0
RINGING_WINDOW = 0.1  # [s] at the end of a run, where the forces' second difference is measured
# A hold damping the HOLD check admits at the low rates of these runs (the HOLD is not under test).
LOW_RATE_HOLD_DAMPING = 100.0  # [N*s/m]


def hold_near_home(model):
    # From an exact equilibrium (the double loop starts bumplessly) a 1 um / 1 urad offset of the
    # reference on every axis gives each unstable mode something to grow from.
    return HoldTrajectory(home_pose(model) + np.full(6, 1e-6))


def run_at(parameters, controller, gain_set, rate, seconds, trajectory=hold_near_home, substeps=1, widen=False):
    """A lockstep loop at ``rate`` on the embedded plant behind 1 period of loop delay.

    ``widen``: the gain set's valid_rates reach down to ``rate``, with a HOLD damping they admit.
    """
    changes = {"controllers": {"rate": rate}, "simulation": {"rate": rate, "embedded": {"substeps": substeps}}}
    if widen:
        widened = {"valid_rates": {"min": rate, "max": RIGID.controllers.computed_torque.valid_rates.max}}
        changes["controllers"].update(double_loop={**widened, "simulated_plant": widened}, computed_torque=widened)
        changes["safety"] = {"hold_damping": LOW_RATE_HOLD_DAMPING}
    parameters = parameters.replace(**changes)
    model = HexapodModel(parameters)
    plant = DelayedPlant.from_settings(make_plant("embedded", parameters), parameters.simulation)
    control = ControlLoop(model, controller, gain_set=gain_set, arm_on_start=True)
    loop = LockstepLoop(plant, control, trajectory(model))
    records = list(loop.run(seconds))
    assert loop.failure == ""
    return control, records


@pytest.mark.parametrize("factor", [0.9, 1.1])
@pytest.mark.parametrize(("controller", "gain_set", "plant"), [
    ("double_loop", "robot", DRIVES), ("double_loop", "simulated_plant", RIGID), ("computed_torque", "robot", RIGID)])
def test_the_nonlinear_loop_turns_unstable_below_the_lowest_stable_rate(controller, gain_set, plant, factor):
    rate = float(round(factor * lowest_stable_rate(plant, controller, gain_set)))
    control, records = run_at(plant, controller, gain_set, rate, CONFIRMATION_SECONDS, substeps=FINE_SUBSTEPS, widen=True)
    forces = np.array([r.step.forces for r in records[-round(RINGING_WINDOW * rate):]])
    ringing = float(np.max(np.abs(np.diff(forces, 2, axis=0))))
    supervisor = control.supervisor
    print(f"{controller} ({gain_set}) at {rate:g} Hz: {supervisor.state.value} {supervisor.reason!r}, "
          f"largest second difference of the forces {ringing:.3g} N")
    if factor > 1.0:
        assert supervisor.state == SupervisorState.ARMED and ringing < 1e-3
    else:  # the forces bang between the limits, or the supervisor holds: speed limit or saturation held
        assert ringing > 1.0 or (supervisor.state == SupervisorState.FAULT
                                 and ("speed limit" in supervisor.reason or "at the limit" in supervisor.reason))


# Regression figures, about 1.5x what was achieved (in brackets), at the low end of each range on
# the joint-space trajectory (6.82), 2 s: the ramp and a period of its fastest sliders.
TRACKING_SECONDS = 2.0
LOW_RATE_TRACKING = {
    # (controller, gain set, plant, rate [Hz]): (position RMS [m], position max [m])
    ("computed_torque", "simulated_plant", "rigid", 650.0): (1.4e-6, 1.8e-5),  # (8.9e-7, 1.2e-5)
    ("double_loop", "simulated_plant", "rigid", 400.0): (1.2e-4, 1.9e-4),  # (7.8e-5, 1.3e-4)
    ("double_loop", "robot", "drives", 500.0): (2.1e-4, 3.4e-4),  # (1.4e-4, 2.3e-4), Coulomb friction in the plant
}


@pytest.mark.parametrize(("controller", "gain_set", "plant", "rate"), list(LOW_RATE_TRACKING))
def test_loops_at_the_low_end_of_their_range_track(controller, gain_set, plant, rate):
    parameters = {"rigid": RIGID, "drives": load_parameters(default_parameters_path("hexapod_actuators.yaml"))}[plant]
    _, rates = parameters.controllers.valid_rates(controller, gain_set)
    assert rates.min == rate  # the shipped range and HOLD damping
    _, records = run_at(parameters, controller, gain_set, rate, TRACKING_SECONDS,
                        trajectory=lambda model: make_trajectory("joint_space", model))
    # Armed at the first state, it holds until the rate is known (RATE_KNOWN_SPACINGS spacings).
    errors = np.array([r.step.decision.control.position_error_norm for r in records[RATE_KNOWN_SPACINGS:]])
    position_rms, position_max = LOW_RATE_TRACKING[controller, gain_set, plant, rate]
    print(f"{controller} ({gain_set}) at {rate:g} Hz: position RMS {np.sqrt(np.mean(errors**2)):.3g} max {errors.max():.3g} m")
    assert all(r.step.decision.action == Action.CONTROL for r in records[RATE_KNOWN_SPACINGS:])
    assert np.sqrt(np.mean(errors**2)) < position_rms and errors.max() < position_max


# ------------------------------------------------------------------------------------------ refusals
def at_rate(rate, parameters=RIGID):
    return parameters.replace(controllers={"rate": rate}, simulation={"rate": rate})


def test_a_controller_outside_its_rates_is_refused_at_construction():
    parameters = at_rate(250.0)
    message = (r"hexapod\.yaml: hexapod\.controllers\.rate: 250 Hz lies outside "
               r"hexapod\.controllers\.computed_torque\.valid_rates = \[650, 10000\] Hz")
    with pytest.raises(ParameterError, match=message):
        make_controller("computed_torque", HexapodModel(parameters), gain_set="simulated_plant")
    with pytest.raises(ParameterError, match=message):
        ControlLoop(HexapodModel(parameters), "computed_torque")
    # Each gain set its own range: at 450 Hz the simulated plant's double loop runs, the robot's does not.
    model = HexapodModel(at_rate(450.0))
    make_controller("double_loop", model, gain_set="simulated_plant")
    with pytest.raises(ParameterError, match=r"hexapod\.controllers\.double_loop\.valid_rates = \[500"):
        make_controller("double_loop", model, gain_set="robot")


def feed(control, stamps, reference_pose=None):
    """Joint states at home stamped ``stamps`` (received at once), with a reference at each."""
    q = np.full(6, RIGID.home_actuator_position)
    record = None
    for stamp in stamps:
        if reference_pose is not None:
            control.reference_sample(stamp, HoldTrajectory(reference_pose).sample(stamp))
        record = control.joint_state(stamp, stamp, NAMES, q, np.zeros(6))
    return record


def test_arming_is_refused_until_the_rate_is_known_and_outside_the_range():
    control = ControlLoop(HexapodModel(RIGID), "computed_torque")  # valid_rates [650, 10000] Hz
    feed(control, 10.0 + 0.004 * np.arange(RATE_KNOWN_SPACINGS))  # 250 Hz, one spacing short
    accepted, message = control.arm(10.0 + 0.004 * (RATE_KNOWN_SPACINGS - 1))
    assert not accepted and f"rate is not known yet ({RATE_KNOWN_SPACINGS - 1} stamp spacings" in message
    start = 10.0 + 0.004 * RATE_KNOWN_SPACINGS
    feed(control, [start])
    accepted, message = control.arm(start)
    assert not accepted
    assert message == (f"cannot arm: joint states come at 250 Hz (median stamp spacing 4 ms over the last "
                       f"{RATE_KNOWN_SPACINGS}), outside hexapod.controllers.computed_torque.valid_rates = [650, 10000] Hz")
    assert control.supervisor.state == SupervisorState.DISARMED
    fast = start + 0.001 * np.arange(1, RATE_KNOWN_SPACINGS + 2)  # more than half the spacings 1 ms
    feed(control, fast)
    assert control.arm(fast[-1]) == (True, "armed")


def armed_at_1_khz(pose):
    """Computed torque armed on states fed at 1 kHz. They stay at home whatever the forces: the bare
    law, or its prediction of their motion would push until the saturation row holds."""
    model = HexapodModel(RIGID.replace(controllers={"delay_compensation": {"predictor": "none"}}))
    control = ControlLoop(model, "computed_torque")  # [650, 10000] Hz
    feed(control, 0.001 * np.arange(1, 2 * RATE_WINDOW), pose)
    assert control.arm(0.001 * (2 * RATE_WINDOW - 1))[0]
    return control, 0.001 * (2 * RATE_WINDOW - 1)


def test_a_drop_of_the_rate_while_armed_holds_within_the_stated_slow_periods():
    model = HexapodModel(RIGID)
    pose = home_pose(model)
    control, last = armed_at_1_khz(pose)
    spacing = 0.0025  # 400 Hz
    stamps = last + spacing * np.arange(1, RATE_WINDOW + 1)
    actions = [feed(control, [stamp], pose).decision.action for stamp in stamps]
    # The drop row: the slow spacings in a row cover RATE_DROP_SPAN_S (less the rates' tolerance).
    slow = math.ceil(RATE_DROP_SPAN_S * (1.0 - RATE_TOLERANCE) / spacing - 1e-9)
    assert slow == 20
    assert actions == [Action.CONTROL] * (slow - 1) + [Action.HOLD] * (RATE_WINDOW - slow + 1)
    supervisor = control.supervisor
    assert supervisor.state == SupervisorState.FAULT and supervisor.fault_action == Action.HOLD
    assert supervisor.reason.startswith("joint-state rate dropped: the last 20 stamp spacings, 50 ms (2.5 to 2.5 ms each)")
    assert "hexapod.controllers.computed_torque.valid_rates = [650, 10000] Hz" in supervisor.reason
    later = stamps[-1] + 0.001 * np.arange(1, 2 * RATE_WINDOW)
    assert feed(control, later, pose).decision.action == Action.HOLD  # latched, though 1 kHz again
    assert control.status_values()["joint_state_rate"] == pytest.approx(1000.0)


def test_a_stall_and_its_catch_up_do_not_hold():
    """A driver stalled for 13 ms, then 2 ms apart for a few periods as it catches up (seen on a loaded
    virtual machine), then at 1 kHz again: slow spacings for less than RATE_DROP_SPAN_S, no drop."""
    model = HexapodModel(RIGID)
    pose = home_pose(model)
    control, last = armed_at_1_khz(pose)
    spacings = [0.013, 0.003, 0.002, 0.002, 0.002, 0.002, 0.002] + [0.001] * 50
    assert sum(spacings[:7]) < RATE_DROP_SPAN_S * (1.0 - RATE_TOLERANCE)
    stamps = last + np.cumsum(spacings)
    actions = {feed(control, [stamp], pose).decision.action for stamp in stamps}
    assert actions == {Action.CONTROL}


def test_a_rate_drifting_outside_while_armed_is_a_latched_hold():
    """Spacings alternating 1 and 4 ms (400 Hz on average) never make five slow ones in a row: the
    median of the window catches them once it turns over."""
    model = HexapodModel(RIGID)
    pose = home_pose(model)
    control, last = armed_at_1_khz(pose)
    stamps = last + np.cumsum(np.tile([0.004, 0.001], RATE_WINDOW))
    actions = [feed(control, [stamp], pose).decision.action for stamp in stamps]
    turned = actions.index(Action.HOLD)
    assert RATE_WINDOW - 2 <= turned <= RATE_WINDOW + 1  # half the window's spacings are 4 ms by then
    assert all(action == Action.HOLD for action in actions[turned:])
    supervisor = control.supervisor
    # Even window: the median averages the middle spacings, 1 and 4 ms.
    assert supervisor.reason.startswith(f"joint states come at {1.0 / ((0.001 + 0.004) / 2):.4g} Hz")


@pytest.mark.parametrize("delay", [0, 1, 2, 3])
def test_the_hold_damping_bound_is_where_the_delayed_damper_turns_unstable(delay):
    """v_k+1 = v_k - a v_k-d as a companion matrix: its eigenvalues against the closed form."""

    def radius(a):
        matrix = np.zeros((delay + 1, delay + 1))
        matrix[0, 0] += 1.0
        matrix[0, delay] -= a
        matrix[1:, :-1] = np.eye(delay)
        return float(np.max(np.abs(np.linalg.eigvals(matrix))))

    bound = hold_damping_bound(delay)
    assert radius(0.99 * bound) < 1.0 < radius(1.01 * bound)


def test_a_hold_damper_unstable_at_the_lowest_valid_rate_is_refused():
    model = HexapodModel(RIGID)
    _, rates = RIGID.controllers.valid_rates("double_loop", "simulated_plant")
    lightest = 0.8257  # [kg] the rigid model's lightest mode at home (test_controllers.py, doc/controllers.md)
    critical = hold_damping_bound(RIGID.controllers.delay_compensation.delay_periods) * lightest * rates.min
    ControlLoop(HexapodModel(RIGID.replace(safety={"hold_damping": 0.99 * critical})), "double_loop", "simulated_plant")
    with pytest.raises(ParameterError, match=r"hexapod\.yaml: hexapod\.safety\.hold_damping: .* unstable at 400 Hz, "
                                             r"the lowest rate of hexapod\.controllers\.double_loop\.simulated_plant"):
        ControlLoop(HexapodModel(RIGID.replace(safety={"hold_damping": 1.01 * critical})), "double_loop", "simulated_plant")
    assert model.parameters.safety.hold_damping < 0.99 * critical  # the shipped one is well inside


# ------------------------------------------------------------------------------------------ actual period
def test_stamp_period_is_the_median_spacing_of_increasing_stamps():
    period = StampPeriod()
    assert period.median(0.5) == 0.5  # before two stamps
    for stamp in (0.0, 0.001, 0.002, 0.002, 0.001, 0.005, 0.006):  # a copy, one out of order, a dropped pair
        period.add(stamp)
    # spacings taken: 0.001, 0.001, (0.002 -> 0.001: none), 0.004 (from 0.001), 0.001
    assert period.spacings == 4 and not period.full
    assert period.median(0.5) == pytest.approx(0.001, abs=1e-15)


@pytest.mark.parametrize("backend", ["c", "python"])
def test_the_integral_sums_the_velocity_error_over_the_actual_periods(backend):
    """Held at home against a reference there, the velocity error is -q_dot: the integral must be
    its start plus the sum of -q_dot_k dt_k, dt_1 the nominal period, the others the stamp spacings
    bounded by the longest valid period (a gap after dropped states counts as that)."""
    model = HexapodModel(RIGID)
    controller = make_controller("double_loop", model, gain_set="simulated_plant")
    if backend == "c" and compiled_cycle.cycle_library() is None:
        pytest.skip("no compiled control cycle here")
    assert controller.select_cycle(backend) == backend
    q, reference = model.home_q, HoldTrajectory(home_pose(model)).sample(0.0)
    spacings = [0.0008, 0.0013, 0.001, 0.025, 0.0009, 0.0, 0.0011]  # a dropped burst, a repeated stamp
    stamps = 3.0 + np.cumsum(spacings)
    speeds = np.random.default_rng(5).normal(0.0, 1e-3, (len(stamps), 6))
    controller.reset(3.0, q, np.zeros(6))
    expected = controller.integral.copy()
    longest = 1.0 / RIGID.controllers.double_loop.simulated_plant.valid_rates.min
    for k, (t, qd) in enumerate(zip(stamps, speeds)):
        output = controller.update(t, q, qd, reference)
        assert output.status.value == "ok", output.message
        step = RIGID.controllers.period if k == 0 else min(t - stamps[k - 1], longest)
        expected -= qd * step
    np.testing.assert_allclose(controller.integral, expected, rtol=0, atol=1e-15)
    if backend == "c":
        assert controller.cycle.finished == len(stamps)
