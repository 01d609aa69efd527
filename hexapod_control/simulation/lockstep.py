"""One lockstep loop: plant, trajectory and the control loop stepped in a fixed order, no middleware.

For plant step k at t_k = k dt (the order the DDS stacks keep too, so their bags agree):

1. the reference stamped t_k is sampled and taken (none at k = 0: the controller holds; the
   trajectory's own t = 0 is its first publication, t_1, as the trajectory node's autostart does),
   in the form a reference message gives it; a trajectory from ``make_trajectory``, checked along
   its path when built, is not checked again per sample (control/safety.py);
2. the plant's measured joint state stamped t_k is answered by the :class:`ControlLoop`
   (supervisor, controller, FK pose, diagnostics);
3. the answer is applied and the plant steps once.

Every control step sees exactly the reference and the state of its own instant, so two runs with
the same parameters give the same numbers. :meth:`LockstepLoop.run` yields one
:class:`LoopRecord` per step; the main job writes them to bags, the one-process stack node
publishes them, tests read them directly. Needs ``simulation.rate == controllers.rate`` (the
parameters schema enforces it).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from hexapod_control.control.loop import ControlLoop, StepRecord
from hexapod_control.control.trajectories import CheckedTrajectory, Reference
from hexapod_control.conventions import stamp_fields
from hexapod_control.errors import HexapodError
from hexapod_control.simulation.plant import Plant


@dataclass(frozen=True)
class LoopRecord:
    """One lockstep step: the reference published at t, the measurement and its answer."""

    t: float  # [s] the joint state's stamp (plant time, as its message carries it: message_time)
    reference: Reference | None  # published at t (None at step 0)
    applied_forces: np.ndarray  # (6,) [N] acting on the plant when it was measured
    step: StepRecord  # the control loop's answer (forces, decision, pose, diagnostic)


def message_time(t: float) -> float:
    """``t`` [s] through a message stamp and back, as conventions.time_from_stamp reads it."""
    sec, nanosec = stamp_fields(t)
    return sec + 1e-9 * nanosec


class LockstepLoop:
    """Steps ``plant`` under ``control`` along ``trajectory`` (see the module doc)."""

    def __init__(self, plant: Plant, control: ControlLoop, trajectory):
        self.plant = plant
        self.control = control
        self.trajectory = trajectory
        self.steps = 0
        self.failure = ""  # why the plant stopped (SimulationDivergedError, ...), "" while it runs
        self._origin: float | None = None
        self._checked = isinstance(trajectory, CheckedTrajectory)  # checked along its path when built

    def step(self) -> LoopRecord | None:
        """One plant step; None once the plant has stopped."""
        if self.failure:
            return None
        plant, control = self.plant, self.control
        t = plant.time
        # The step's stamp as a node reads it back (sec + 1e-9 nanosec): the loop, the nodes and a
        # replay of the recorded bag then all see the same floats.
        stamp = message_time(t)
        reference = None
        if self.steps > 0:
            self._origin = t if self._origin is None else self._origin
            sample = self.trajectory.sample(t - self._origin)
            reference = Reference(stamp, sample.pose, sample.velocity, sample.acceleration)
            if self._checked:
                control.checked_sample(stamp, reference)
            else:
                control.reference_sample(stamp, reference)
        applied = np.asarray(plant.applied_forces, dtype=float)
        answer = control.joint_state(stamp, stamp, control.joint_names, plant.joint_positions(), plant.joint_velocities())
        record = LoopRecord(stamp, reference, applied, answer)
        self.steps += 1
        try:
            plant.apply_forces(answer.forces)
            plant.step()
        except HexapodError as error:
            self.failure = f"simulation stopped at t = {t:.4f} s: {error}"
        return record

    def run(self, duration: float) -> Iterator[LoopRecord]:
        """Yield the records of ``duration`` simulated seconds (fewer if the plant stops)."""
        for _ in range(round(duration / self.plant.dt)):
            record = self.step()
            if record is None:
                return
            yield record
