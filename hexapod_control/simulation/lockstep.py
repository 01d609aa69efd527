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
:class:`LoopRecord` per step; the one-process stack node publishes them, tests read them directly.
:meth:`LockstepLoop.run_blocks` yields the same steps as :class:`LoopBlock` arrays, and runs the
steps the compiled step answers in C (compiled_lockstep.py), with the reference read off a grid of
the trajectory; the main job writes its blocks to bags. Needs ``simulation.rate ==
controllers.rate`` (the parameters schema enforces it).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from hexapod_control.codegen.lockstep import LOCKSTEP_ROW
from hexapod_control.control.loop import ControlLoop, DiagnosticStatus, StepRecord
from hexapod_control.control.safety import Action
from hexapod_control.control.trajectories import CheckedTrajectory, Reference
from hexapod_control.conventions import stamp_fields
from hexapod_control.errors import HexapodError
from hexapod_control.simulation import compiled_lockstep
from hexapod_control.simulation.plant import Plant

_ROW_ENDS = list(itertools.accumulate(size for _, size in LOCKSTEP_ROW))
ROW = {name: slice(end - size, end) for (name, size), end in zip(LOCKSTEP_ROW, _ROW_ENDS)}  # a row's columns
ROW_SIZE = _ROW_ENDS[-1]


@dataclass(frozen=True)
class LoopRecord:
    """One lockstep step: the reference published at t, the measurement and its answer."""

    t: float  # [s] the joint state's stamp (plant time, as its message carries it: message_time)
    reference: Reference | None  # published at t (None at step 0)
    applied_forces: np.ndarray  # (6,) [N] acting on the plant when it was measured
    step: StepRecord  # the control loop's answer (forces, decision, pose, diagnostic)


@dataclass(frozen=True)
class LoopBlock:
    """Consecutive lockstep steps as arrays: row k holds step k's fields as ``ROW`` names them (the
    stamp, the measured q and q_dot, the forces acting when measured, the answer, the pose, the
    reference), NaN where a step has no reference (step 0) or no pose (its FK failed)."""

    rows: np.ndarray  # (n, ROW_SIZE)
    has_reference: np.ndarray  # (n,) bool
    has_pose: np.ndarray  # (n,) bool
    diagnostics: list[tuple[int, DiagnosticStatus]]  # (row, status) of the steps that sent one
    action: str  # the last step's decision (Action value)

    def field(self, name: str) -> np.ndarray:
        return self.rows[:, ROW[name]]

    @property
    def t(self) -> np.ndarray:
        """(n,) the steps' stamps [s]."""
        return self.rows[:, ROW["t"].start]


def message_time(t: float) -> float:
    """``t`` [s] through a message stamp and back, as conventions.time_from_stamp reads it."""
    sec, nanosec = stamp_fields(t)
    return sec + 1e-9 * nanosec


def message_times(steps: np.ndarray, dt: float) -> np.ndarray:
    """:func:`message_time` of each ``step * dt``, with the same operations on each element."""
    nanoseconds = np.rint(np.asarray(steps) * dt * 1e9).astype(np.int64)
    sec, nanosec = np.divmod(nanoseconds, 1_000_000_000)
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
        self.compiled: compiled_lockstep.CompiledLockstep | None = None  # set by run_blocks

    def step(self) -> LoopRecord | None:
        """One plant step; None once the plant has stopped."""
        return self._step(self._sample)

    def _sample(self, t: float, stamp: float) -> Reference:
        sample = self.trajectory.sample(t - self._origin)
        return Reference(stamp, sample.pose, sample.velocity, sample.acceleration)

    def _grid_sample(self, t: float, stamp: float) -> Reference:
        self._start_grid()
        return self.compiled.grid.sample(stamp)

    def _start_grid(self) -> None:
        """The compiled run's grid starts the trajectory at the first reference's stamp."""
        if self.compiled.grid.source is None:
            self.compiled.start(message_time(self._origin))

    def _step(self, reference_at, taken_status: str | None = None) -> LoopRecord | None:
        """One plant step with the reference ``reference_at(t, stamp)``; ``taken_status``: the
        compiled lockstep's status of this step, whose joint state its intake took already."""
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
            reference = reference_at(t, stamp)
            if self._checked:
                control.checked_sample(stamp, reference)
            else:
                control.reference_sample(stamp, reference)
        applied = np.asarray(plant.applied_forces, dtype=float)
        if taken_status is None:
            answer = control.joint_state(stamp, stamp, control.joint_names, plant.joint_positions(),
                                         plant.joint_velocities())
        else:
            answer = control.after_message(taken_status, stamp)
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

    def run_blocks(self, duration: float, compiled: bool = True) -> Iterator[LoopBlock]:
        """Yield ``duration`` simulated seconds (fewer if the plant stops) as blocks of at most
        compiled_lockstep.BLOCK_STEPS steps; ``compiled``: run the steps the compiled step answers
        in C (the module doc), where the plant has a C step."""
        total = round(duration / self.plant.dt)
        if compiled and self.compiled is None:
            self.compiled = compiled_lockstep.attach(self.plant, self.control, self.trajectory)
        fast = self.compiled if compiled else None
        reference_at = self._sample if fast is None else self._grid_sample
        while self.steps < total and not self.failure:
            block = _BlockBuilder()
            while len(block) < compiled_lockstep.BLOCK_STEPS and self.steps < total and not self.failure:
                if fast is not None and self._origin is not None and self.control.ready_for_compiled_steps():
                    count = min(total - self.steps, compiled_lockstep.BLOCK_STEPS - len(block))
                    first = round(self.plant.time / self.plant.dt)  # plant.time is steps * dt
                    stamps = message_times(np.arange(first, first + count), self.plant.dt)
                    due = self.control.compiled_status_due()
                    # The call returns at the answer a status is due at: no stamp past it is needed.
                    stamps = stamps[:int(np.searchsorted(stamps, due)) + 1]
                    self._start_grid()
                    result = fast.advance(stamps, due)
                    if result is not None:
                        answers, reason, status = result
                        self._take_rows(block, answers, reason)
                        if reason == "pending":
                            block.add(self._step(reference_at, self._taken_status(status)))
                        continue
                block.add(self._step(reference_at))
            if len(block):
                yield block.finish()

    def _taken_status(self, status: int) -> str | None:
        """The compiled step's status of a step it left to Python after its intake took the state;
        None when the state was not taken (the Python step then reads it as usual)."""
        step = self.control.compiled_step
        name = step.library.statuses[status]
        return name if name != "grid" and step.message_intake() == "taken" else None

    def _take_rows(self, block: _BlockBuilder, answers: int, reason: str) -> None:
        """The rows the compiled lockstep wrote, the diagnostics status of its last answer if one is
        due, and the plant step it left (reason ``plant``)."""
        if not answers:
            return
        rows = self.compiled.rows[:answers]
        t = float(rows[-1, ROW["t"].start])
        block.add_rows(rows, self.control.diagnostic(t))
        self.steps += answers
        if reason == "plant":
            try:
                self.plant.step()
            except HexapodError as error:
                self.failure = f"simulation stopped at t = {t:.4f} s: {error}"


class _BlockBuilder:
    """The rows of a LoopBlock as they come: from the compiled lockstep's arrays or from records."""

    def __init__(self):
        self._parts: list[np.ndarray] = []
        self._reference: list[np.ndarray] = []
        self._pose: list[np.ndarray] = []
        self._diagnostics: list[tuple[int, DiagnosticStatus]] = []
        self._length = 0
        self._action = ""

    def __len__(self) -> int:
        return self._length

    def add_rows(self, rows: np.ndarray, diagnostic: DiagnosticStatus | None) -> None:
        self._parts.append(rows.copy())
        self._reference.append(np.ones(len(rows), dtype=bool))
        self._pose.append(np.ones(len(rows), dtype=bool))
        self._length += len(rows)
        if diagnostic is not None:
            self._diagnostics.append((self._length - 1, diagnostic))
        self._action = Action.CONTROL.value

    def add(self, record: LoopRecord | None) -> None:
        if record is None:  # the plant had stopped
            return
        row = np.full(ROW_SIZE, np.nan)
        step = record.step
        row[ROW["t"]] = record.t
        row[ROW["q"]], row[ROW["qd"]] = step.q, step.qd
        row[ROW["applied"]], row[ROW["forces"]] = record.applied_forces, step.forces
        if step.pose is not None:
            row[ROW["pose"]] = step.pose
        reference = record.reference
        if reference is not None:
            row[ROW["reference"]] = np.concatenate((reference.pose, reference.velocity, reference.acceleration))
        self._parts.append(row[None, :])
        self._reference.append(np.array([reference is not None]))
        self._pose.append(np.array([step.pose is not None]))
        if step.diagnostic is not None:
            self._diagnostics.append((self._length, step.diagnostic))
        self._length += 1
        self._action = step.decision.action.value

    def finish(self) -> LoopBlock:
        return LoopBlock(np.concatenate(self._parts), np.concatenate(self._reference), np.concatenate(self._pose),
                         self._diagnostics, self._action)
