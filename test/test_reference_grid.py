"""The reference grid: quintic Hermite interpolation of a source sampled every period.

Checked against the sources themselves: a quintic move is reproduced, a hold exactly, a smooth
trajectory converges at the sixth order of the period (the pose error of Hermite interpolation with
value, slope and curvature at both ends), each knot is sampled once however many stamps fall
between, and a source that fails leaves the knots already held usable.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from hexapod_control.control.reference_grid import ReferenceGrid, knot_interval
from hexapod_control.control.trajectories import HoldTrajectory, SmoothMove, make_trajectory
from hexapod_control.control.trajectory_player import TrajectoryPlayer
from hexapod_control.errors import InvalidInputError
from hexapod_control.model.hexapod import HexapodModel

MODEL = HexapodModel.from_yaml(None)
PERIOD = MODEL.parameters.trajectories.sample_period
HOME = MODEL.forward_kinematics(MODEL.home_q).pose
ORIGIN = 1.7e9  # an epoch-like clock: the grid works on differences from the source's start
SPAN_KNOTS = 64  # a grid that holds the 0.1 s span below


class Counting:
    """A source that counts its samples and fails from ``fail_after`` on."""

    def __init__(self, source, fail_after=math.inf):
        self.source, self.fail_after, self.calls = source, fail_after, 0

    def sample(self, t):
        if t >= self.fail_after:
            raise InvalidInputError(f"no sample at {t}")
        self.calls += 1
        return self.source.sample(t)


def errors(grid: ReferenceGrid, source, times) -> np.ndarray:
    """Largest |grid - source| of the pose, the velocity and the acceleration over ``times``."""
    worst = np.zeros(3)
    for t in times:
        stamp = ORIGIN + t  # rounded to the clock's resolution: the source is asked at what it holds
        mine, exact = grid.sample(stamp), source.sample(stamp - ORIGIN)
        for k, name in enumerate(("pose", "velocity", "acceleration")):
            worst[k] = max(worst[k], np.max(np.abs(getattr(mine, name) - getattr(exact, name))))
    return worst


def test_a_quintic_move_is_reproduced_and_a_hold_exactly():
    target = HOME + np.array([0.01, -0.02, 0.015, 0.02, -0.01, 0.03])
    move = SmoothMove(MODEL, HOME, target, start_time=0.0)
    grid = ReferenceGrid(PERIOD, 8)
    grid.reset(move, ORIGIN)
    times = np.random.default_rng(1).uniform(0.0, move.duration, 500)
    pose, velocity, acceleration = errors(grid, move, np.sort(times))
    # Within a move the quintic is the move's own time law: only rounding remains.
    assert pose < 1e-15 and velocity < 1e-12 and acceleration < 1e-9, (pose, velocity, acceleration)

    hold = HoldTrajectory(target)
    grid.reset(hold, ORIGIN)
    for t in (0.0, 0.0013, 0.5, 12.3456):
        sample = grid.sample(ORIGIN + t)
        assert np.array_equal(sample.pose, target) and not sample.velocity.any() and not sample.acceleration.any()


@pytest.mark.parametrize("name", ["operational_space", "joint_space", "excitation"])
def test_the_error_falls_as_the_sixth_power_of_the_period(name):
    source = make_trajectory(name, MODEL)
    times = np.linspace(3.0, 4.0, 401) + 0.37e-3  # ramped up, between knots
    coarse, fine = ReferenceGrid(0.04, 8), ReferenceGrid(0.02, 8)
    for grid in (coarse, fine):
        grid.reset(source, ORIGIN)
    ratio = errors(coarse, source, times) / errors(fine, source, times)
    # Halving h divides the pose error by 2^6, the velocity's by 2^5, the acceleration's by 2^4
    # (less a margin for the sampled maximum): a lower-order interpolant would not.
    assert ratio[0] > 50 and ratio[1] > 25 and ratio[2] > 12, ratio
    shipped = ReferenceGrid(PERIOD, 8)
    shipped.reset(source, ORIGIN)
    assert errors(shipped, source, times)[0] < 1e-12  # at the shipped period


def test_each_knot_is_sampled_once_and_a_failure_keeps_what_is_held():
    source = Counting(make_trajectory("operational_space", MODEL), fail_after=0.5)
    grid = ReferenceGrid(PERIOD, 8)
    grid.reset(source, ORIGIN)
    stamps = ORIGIN + np.arange(0.0, 0.45, 0.00025)  # 4 kHz
    for stamp in stamps:
        grid.sample(stamp)
    assert source.calls == math.floor(0.45 / PERIOD - 1e-9) + 2  # the knots from 0 to the one after the last stamp
    assert grid.extend(stamps[-1] + 3 * PERIOD) is None and source.calls == math.floor(0.45 / PERIOD - 1e-9) + 5
    assert grid.sample(stamps[-1] + 2.5 * PERIOD) and source.calls == math.floor(0.45 / PERIOD - 1e-9) + 5  # held ahead
    before = grid.sample(stamps[-1])
    with pytest.raises(InvalidInputError):
        grid.sample(ORIGIN + 0.6)
    again = grid.sample(stamps[-1])
    assert np.array_equal(before.pose, again.pose) and np.array_equal(before.acceleration, again.acceleration)


def test_the_player_samples_its_source_on_the_grid():
    player = TrajectoryPlayer(MODEL, "operational_space")
    player.measured(HOME, ORIGIN)
    player.start(ORIGIN)
    assert player.extend(ORIGIN + 0.0101)
    reference, failure = player.sample(ORIGIN + 0.0101)
    exact = player.active.sample(0.0101)
    assert failure == "" and reference.t == ORIGIN + 0.0101
    np.testing.assert_allclose(reference.pose, exact.pose, rtol=0, atol=1e-12)
    assert player.last_reference is reference


def test_the_robot_stacks_span_fits_its_players_grid_wherever_the_stamp_falls_between_knots():
    from hexapod_control.ros import robot_stack

    player = TrajectoryPlayer(MODEL, "operational_space", robot_stack.GRID_KNOTS)
    player.measured(HOME, ORIGIN)
    player.start(ORIGIN)
    period = player.grid.period
    for latest in ORIGIN + 1.0 + period * np.array([0.0, 0.25, 0.5, 0.999]):
        assert player.hold(latest - period, latest + robot_stack.GRID_SPAN_KNOTS * period), latest
        assert player.grid.holds(latest - period) and player.grid.holds(latest + robot_stack.GRID_SPAN_KNOTS * period)


def test_the_player_holds_a_span_ahead_of_a_move_then_its_trajectory():
    player = TrajectoryPlayer(MODEL, "operational_space", SPAN_KNOTS)
    player.measured(HOME + np.array([0.004, -0.003, 0.002, 0.01, 0.0, -0.02]), ORIGIN)
    player.start(ORIGIN)  # a move to the trajectory's start, then the trajectory
    end = player.active.move.duration
    times = ORIGIN + end + np.linspace(-0.05, 0.05, 201)  # across the move's end
    assert player.hold(times[0], times[-1]) and player.grid.holds(times[-1])
    for t in times:
        held = player.grid.sample(t)
        exact = player.active.sample(t - ORIGIN)
        np.testing.assert_allclose(held.pose, exact.pose, rtol=0, atol=1e-9)  # the grid's error at the move's end
    rows = player.active.sample_rows(times - ORIGIN)
    for row, t in zip(rows, times):
        exact = player.active.sample(t - ORIGIN)
        np.testing.assert_allclose(row, np.concatenate((exact.pose, exact.velocity, exact.acceleration)),
                                   rtol=1e-13, atol=1e-15)


def test_rows_of_the_operational_space_trajectory_are_its_samples():
    trajectory = make_trajectory("operational_space", MODEL)
    times = np.concatenate(([-0.5, 0.0], np.linspace(1e-4, 40.0, 2001)))
    rows = trajectory.sample_rows(times)
    samples = np.array([np.concatenate((s.pose, s.velocity, s.acceleration))
                        for s in (trajectory.sample(float(t)) for t in times)])
    np.testing.assert_allclose(rows, samples, rtol=1e-13, atol=1e-15)  # numpy's exp, sin, cos against math's
    with pytest.raises(InvalidInputError):
        trajectory.sample_rows(np.array([0.0, math.nan]))


def test_rows_of_a_hold_are_its_samples():
    hold = HoldTrajectory(HOME + np.array([0.004, -0.003, 0.002, 0.01, 0.0, -0.02]))
    times = np.linspace(-1.0, 1.0, 11)
    samples = [hold.sample(float(t)) for t in times]
    np.testing.assert_array_equal(hold.sample_rows(times),
                                  [np.concatenate((s.pose, s.velocity, s.acceleration)) for s in samples])
    with pytest.raises(InvalidInputError, match="finite"):
        hold.sample_rows(np.array([0.0, math.inf]))


def test_rows_of_a_move_are_its_samples():
    move = SmoothMove(MODEL, HOME, HOME + np.array([0.02, -0.01, 0.015, 0.05, -0.03, 0.1]), start_time=0.3)
    times = np.concatenate(([-1.0, 0.3], np.linspace(0.3, 0.3 + move.duration, 501), [0.3 + move.duration + 1.0]))
    samples = np.array([np.concatenate((s.pose, s.velocity, s.acceleration))
                        for s in (move.sample(float(t)) for t in times)])
    np.testing.assert_allclose(move.sample_rows(times), samples, rtol=1e-14, atol=1e-15)
    with pytest.raises(InvalidInputError, match="finite"):
        move.sample_rows(np.array([0.0, math.nan]))


def test_a_held_span_has_every_knot_it_needs_and_keeps_those_it_held():
    source = make_trajectory("operational_space", MODEL)
    grid, reference = ReferenceGrid(PERIOD, 64), ReferenceGrid(PERIOD, 64)
    grid.reset(source, ORIGIN)
    reference.reset(source, ORIGIN)
    for start, stop in ((0.0, 0.05), (0.05, 0.1), (0.0999, 0.11), (0.5, 0.55)):  # on, overlapping, after a jump
        grid.hold(ORIGIN + start, ORIGIN + stop)
        for t in np.arange(start, stop, 0.00025):
            held, sampled = grid.sample(ORIGIN + t), reference.sample(ORIGIN + t)  # hold() makes sample() sample nothing
            for part in ("pose", "velocity", "acceleration"):
                np.testing.assert_allclose(getattr(held, part), getattr(sampled, part), rtol=1e-12, atol=1e-14)
    counting = Counting(source)
    grid.reset(counting, ORIGIN)
    grid.hold(ORIGIN, ORIGIN + 0.05)
    grid.hold(ORIGIN + 0.04, ORIGIN + 0.06)
    # Each knot once, from 0 to the one after the last stamp (a source without rows: one by one).
    assert counting.calls == knot_interval(grid.array, ORIGIN + 0.06)[0] + 2
    with pytest.raises(ValueError):
        grid.hold(ORIGIN, ORIGIN + 64 * PERIOD)
