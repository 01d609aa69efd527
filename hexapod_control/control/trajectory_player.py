"""What the trajectory node decides, without ROS: which reference to follow, and when it changes.

:class:`TrajectoryPlayer` holds the active reference source (a hold, a move to a goal pose, the
selected trajectory after a move to its start) and samples it at a given time. Changes happen only
through its methods (start, stop, move_to, the first measured pose), and each is validated when it
happens: a move is checked along its path by inverse kinematics (``SmoothMove``), so sampling it
at 1 kHz needs no further check. The selected trajectory is built and checked along its path once,
when the player is made (``make_trajectory``): a trajectory that leaves the limits is refused at
start-up, and ``start``, which a node runs between two joint states, costs no more than a move.
The trajectory node and the one-process robot stack are shells around it.
"""

from __future__ import annotations

import numpy as np

from hexapod_control.control.reference_grid import ReferenceGrid
from hexapod_control.control.trajectories import (
    TRAJECTORY_NAMES,
    HoldTrajectory,
    Reference,
    SmoothMove,
    make_trajectory,
    sample_rows,
)
from hexapod_control.errors import HexapodError, InvalidInputError
from hexapod_control.model.hexapod import HexapodModel

TRAJECTORY_CHOICES = (*TRAJECTORY_NAMES, "hold")
# Knots of the reference grid kept by default: those around the newest stamp and a few before it.
# The robot stack asks for more, the span its rcl loop in C reads ahead (:meth:`TrajectoryPlayer.hold`).
GRID_KNOTS = 16


class MoveThenTrajectory:
    """A SmoothMove to a trajectory's start, then the trajectory with its clock starting at 0."""

    def __init__(self, move: SmoothMove, trajectory):
        self.move, self.trajectory = move, trajectory

    def sample(self, t: float) -> Reference:
        if t < self.move.duration:
            return self.move.sample(t)
        return self.trajectory.sample(t - self.move.duration)

    def sample_rows(self, times: np.ndarray) -> np.ndarray:
        """(n, 18) samples at ``times``: the move's one by one, the trajectory's at once where it can."""
        times = np.asarray(times, dtype=float)
        moving = times < self.move.duration
        rows = np.empty((len(times), 18))
        rows[moving] = sample_rows(self.move, times[moving])
        rows[~moving] = sample_rows(self.trajectory, times[~moving] - self.move.duration)
        return rows


class TrajectoryPlayer:
    """The active reference source of one robot; times are seconds on the caller's clock.

    Until something is started the player holds the first measured pose (and has no reference
    before one is known: the controller then holds by itself); while the robot is not armed that
    hold follows the measured pose (:meth:`measured` with ``follow``), so that arming starts where
    the platform is and a move started then is the only motion. A source that fails to sample is
    replaced by a hold at the last good reference.

    The active source is sampled on a grid of ``trajectories.sample_period`` from its start and
    interpolated at each time asked (:class:`ReferenceGrid`, whose knots the compiled step reads).
    """

    def __init__(self, model: HexapodModel, trajectory_name: str, grid_knots: int = GRID_KNOTS):
        if trajectory_name not in TRAJECTORY_CHOICES:
            raise InvalidInputError(f"unknown trajectory {trajectory_name!r}; expected one of {TRAJECTORY_CHOICES}")
        self.model = model
        self.trajectory_name = trajectory_name
        # Built and checked now (module doc); None for "hold".
        self.trajectory = make_trajectory(trajectory_name, model) if trajectory_name in TRAJECTORY_NAMES else None
        self.move_settings = model.parameters.trajectories.move
        self.active = None  # object with sample(t) -> Reference, or None before any pose is known
        self.origin = 0.0  # caller-clock time at which the active source's t = 0
        self.description = "waiting for the platform pose"
        self.last_reference: Reference | None = None
        self.measured_pose: np.ndarray | None = None
        self.changes = 0  # how many times the active source changed
        self._holding_measured = False  # the active source is the hold at a measured pose
        self.grid = ReferenceGrid(model.parameters.trajectories.sample_period, grid_knots)

    # -------------------------------------------------------------- changes
    def activate(self, source, now: float, description: str) -> str:
        self.active, self.origin, self.description = source, now, description
        self.grid.reset(source, now)
        self._holding_measured = False
        self.changes += 1
        return description

    def measured(self, pose, now: float, follow: bool = False) -> None:
        """The measured platform pose; the first one becomes a hold when nothing is active.

        ``follow`` (the robot is not armed): a hold at a measured pose moves to this one. Held
        where the platform was first seen (still sinking onto its stops, say), the reference would
        be elsewhere when the robot is armed: the supervisor's ramp from the measured pose to it
        and a move started during that ramp would add their speeds.
        """
        self.measured_pose = np.asarray(pose, dtype=float)
        if self.active is None:
            self.activate(HoldTrajectory(self.measured_pose), now, "hold at the measured pose")
            self._holding_measured = True
        elif follow and self._holding_measured:
            self.active.pose = self.measured_pose.copy()
            self.grid.reset(self.active, self.origin)

    def current_pose(self) -> np.ndarray | None:
        """Where a new motion starts: the current reference, else the measured pose."""
        if self.last_reference is not None:
            return self.last_reference.pose
        return self.measured_pose

    def _move_to(self, target) -> SmoothMove:
        start = self.current_pose()
        if start is None:
            raise InvalidInputError("no current pose yet (no reference published, no platform pose received)")
        return SmoothMove(self.model, start, target, start_time=0.0, settings=self.move_settings)

    def move_to(self, target, now: float) -> str:
        """A smooth move from the current pose to ``target``; raises (UnreachablePoseError, ...) if invalid."""
        move = self._move_to(np.asarray(target, dtype=float))
        return self.activate(move, now, f"move to {np.round(target, 4).tolist()} in {move.duration:.3f} s")

    def start(self, now: float, autostart: bool = False) -> str:
        """The selected trajectory: at once with ``autostart`` (the robot is at its start), else after a move."""
        trajectory = self.trajectory
        if trajectory is None:
            raise InvalidInputError("the selected trajectory is 'hold': nothing to start")
        if autostart:
            return self.activate(trajectory, now, f"{self.trajectory_name} (autostart)")
        move = self._move_to(trajectory.sample(0.0).pose)
        return self.activate(MoveThenTrajectory(move, trajectory), now,
                             f"{self.trajectory_name} after a {move.duration:.3f} s move to its start")

    def stop(self, now: float) -> str:
        pose = self.current_pose()
        if pose is None:
            raise InvalidInputError("nothing to stop: no current pose yet")
        return self.activate(HoldTrajectory(pose), now, "hold at the current reference (stopped)")

    # -------------------------------------------------------------- sampling
    def extend(self, now: float) -> bool:
        """Have the grid hold the knots around ``now`` (for the compiled step, which reads them); False
        when the source fails to sample there, which :meth:`sample` then reports and replaces."""
        if self.active is None:
            return False
        try:
            self.grid.extend(now)
        except (HexapodError, ValueError):
            return False
        return True

    def hold(self, start: float, stop: float) -> bool:
        """Have the grid hold the knots from ``start`` to ``stop`` at once (ReferenceGrid.hold, for the
        rcl loop in C, which reads ahead); False as for :meth:`extend`."""
        if self.active is None:
            return False
        try:
            self.grid.hold(start, stop)
        except (HexapodError, ValueError):
            return False
        return True

    def sample(self, now: float) -> tuple[Reference | None, str]:
        """The reference at ``now`` (stamped ``now``) and, when the source failed, why ('' else)."""
        if self.active is None:
            return None, ""
        try:
            self.last_reference = self.grid.sample(now)
        except (HexapodError, ValueError) as error:
            pose = self.current_pose()
            self.active = HoldTrajectory(pose) if pose is not None else None
            self.grid.reset(self.active, self.origin)
            failure = f"{self.description} failed to sample: {error}; holding"
            self.description = "hold after a trajectory failure"
            self.changes += 1
            return None, failure
        return self.last_reference, ""
