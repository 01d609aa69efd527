"""A simulated board: the embedded plant behind encoder counts, PWM and amplifier lines.

What the driver core sees of it is what it would see of the robot's board:
- encoder counts, quantised, counting from wherever the sliders stood at power-on (the core has to
  calibrate to know positions), and their velocities in counts/s;
- PWM duty cycles quantised to ``scaling.pwm_resolution`` steps, turned into force by the
  amplifier gain, k_t and r of the ``board`` section, acting only while the amplifiers are enabled
  and the brakes released;
- brakes: while applied, the sliders do not move;
- the end stops of :class:`EndStopPlant` at the travel limits of ``limits``;
- a watchdog that, when not reloaded for its timeout, sets the expiration states (zero duty,
  amplifiers disabled, brakes applied) if they were configured before it started (as a Q8 board,
  it changes nothing otherwise), then refuses writes until cleared.
Faults are injected by the tests: an amplifier's fault line, a jump of an encoder's counts.

Time passes only by :meth:`SimulatedBoard.elapse` (the loop's periods); ``read`` never blocks.
"""

from __future__ import annotations

import numpy as np

from hexapod_control.drive.board import Board, BoardSample
from hexapod_control.drive.core import SLIDERS, ForceScaling
from hexapod_control.errors import BoardError, HexapodError, ParameterError, SimulationDivergedError
from hexapod_control.model.parameters import HexapodParameters, Limits
from hexapod_control.simulation.embedded import EmbeddedSimulator

# simulation.rate / sample_rate must be a whole number of plant steps, up to float round-off.
STEPS_PER_SAMPLE_TOLERANCE = 1e-9


class EndStopPlant:
    """The embedded simulator with end stops at the travel limits.

    After every plant step a slider beyond ``limits.actuator_position_min``/``_max`` is put back on
    the limit with its velocity into the stop set to zero (a perfectly plastic stop: the other
    sliders keep their velocities). The stop re-seats the simulator with ``EmbeddedSimulator.reseat``:
    its clock, sensor delay and noise go on.
    ``steps`` counts plant steps since construction; ``end_stop_contacts`` counts the steps that
    ended on a stop. ``collapse`` is "" until the platform sinks past the end of the model, then the
    simulator's message: from then on the plant stays frozen at rest and only the applied forces
    follow the commands.
    """

    def __init__(self, plant: EmbeddedSimulator, limits: Limits):
        self.plant = plant
        self.lower = limits.actuator_position_min
        self.upper = limits.actuator_position_max
        self.steps = 0
        self.end_stop_contacts = 0
        self.collapse = ""
        # Where the last successful step started: the dynamics were evaluated there, so it
        # assembles. A step can end just past the end of the model, which only the next one finds.
        self._last_start, _ = plant.true_state

    def advance(self, forces: np.ndarray, steps: int) -> None:
        """Apply ``forces`` and step ``steps`` times."""
        for _ in range(steps):
            self._step(forces)
            self.steps += 1

    def _step(self, forces: np.ndarray) -> None:
        self.plant.apply_forces(forces)
        if self.collapse:
            return
        q_start, _ = self.plant.true_state
        try:
            self.plant.step()
        except SimulationDivergedError as error:
            self._freeze(error, q_start, self._last_start)
            return
        self._last_start = q_start
        q, qd = self.plant.true_state
        below, above = q < self.lower, q > self.upper
        if not (below.any() or above.any()):
            return
        self.end_stop_contacts += 1
        qd = np.where(below, np.maximum(qd, 0.0), np.where(above, np.minimum(qd, 0.0), qd))
        try:
            self.plant.reseat(np.clip(q, self.lower, self.upper), qd)
        except HexapodError as error:  # the stopped configuration does not assemble: the model ends there
            self._freeze(error, q_start)

    def compiled_state(self) -> tuple | None:
        """(q, q_d, phi, the warm start (18,), the forces acting, q at the start of the last step) for
        a loop that steps this plant in C (ros/native_driver.py); None when it cannot: a plant
        without the C step and an ideal sensor, external forces acting, or collapsed."""
        state = None if self.collapse else self.plant.lockstep_state()
        if state is None:
            return None
        q, qd, forces, phi, warm = state
        return q, qd, phi, warm, forces, self._last_start

    def resume_compiled(self, q, qd, phi, warm, forces, last_start, steps: int) -> None:
        """Take the state such a loop reached after ``steps`` steps, none of which ended on a stop
        (it leaves those to :meth:`advance`)."""
        self.plant.lockstep_resume(q, qd, forces, phi, warm, steps)
        if steps:
            self._last_start = np.array(last_start)
        self.steps += steps

    def _freeze(self, error: HexapodError, *candidates: np.ndarray) -> None:
        """Stop the plant at rest at the first of ``candidates`` that assembles."""
        self.collapse = str(error)
        for q in candidates:
            try:
                self.plant.reseat(q, np.zeros_like(q))
                return
            except HexapodError:
                continue
        raise error  # no candidate assembles: the last successful step's start always should

    def joint_positions(self) -> np.ndarray:
        return self.plant.joint_positions()

    def joint_velocities(self) -> np.ndarray:
        return self.plant.joint_velocities()

    @property
    def applied_forces(self) -> np.ndarray:
        return self.plant.applied_forces


def whole_plant_steps(plant_rate: float, rate: float) -> int | None:
    """Plant steps per period of ``rate``; None unless ``rate`` divides ``plant_rate`` (up to round-off)."""
    ratio = plant_rate / rate
    steps = round(ratio)
    if steps < 1 or abs(ratio - steps) > STEPS_PER_SAMPLE_TOLERANCE * ratio:
        return None
    return steps


class SimulatedBoard(Board):
    """The plant of ``parameters`` behind the board of ``parameters.board`` (see the module doc)."""

    def __init__(self, parameters: HexapodParameters):
        if parameters.board is None:
            raise ParameterError(f"{parameters.source}: hexapod.board: missing section, needed by the simulated board")
        board = parameters.board
        self.plant = EndStopPlant(EmbeddedSimulator(parameters), parameters.limits)
        self.steps_per_sample = whole_plant_steps(parameters.simulation.rate, board.limits.sample_rate)
        if self.steps_per_sample is None:
            raise ParameterError(
                f"{parameters.source}: hexapod.board.limits.sample_rate = {board.limits.sample_rate} Hz must divide "
                f"hexapod.simulation.rate = {parameters.simulation.rate} Hz (a whole number of plant steps per sample)"
            )
        self.period = 1.0 / board.limits.sample_rate
        self.scaling = ForceScaling(board)
        self.counts_per_metre = np.array(board.scaling.counts_per_metre) * np.array(board.scaling.encoder_polarity)
        self.resolution = board.scaling.pwm_resolution
        self._origin = self.plant.joint_positions().copy()  # the encoders count from power-on
        self.count_jumps = np.zeros(SLIDERS)  # injected encoder faults [counts]
        self.amplifier_faults = np.zeros(SLIDERS, dtype=bool)
        self.duty = np.zeros(SLIDERS)
        self.amplifiers_enabled = False
        self.brakes_released = False
        self.expiration_states_set = False
        self.watchdog_timeout: float | None = None  # None: not running
        self.watchdog_expired = False
        self.sampling = False
        self._since_reload = 0.0

    # ---------------------------------------------------------------- the plant's time
    def elapse(self, periods: int = 1) -> None:
        """Let ``periods`` sample periods pass with the outputs as they are."""
        if self.watchdog_timeout is not None and not self.watchdog_expired:
            self._since_reload += periods * self.period
            if self._since_reload > self.watchdog_timeout:
                self._expire()
        if not self.brakes_released:
            return  # the brakes hold every slider
        self.plant.advance(self.forces(), periods * self.steps_per_sample)

    def forces(self) -> np.ndarray:
        """The forces the amplifiers apply now [N]."""
        if not self.amplifiers_enabled:
            return np.zeros(SLIDERS)
        quantised = np.round(self.duty * self.resolution) / self.resolution
        return quantised * self.scaling.motor_polarity * self.scaling.newtons_per_duty

    def _expire(self) -> None:
        self.watchdog_expired = True
        if self.expiration_states_set:
            self.duty = np.zeros(SLIDERS)
            self.amplifiers_enabled = False
            self.brakes_released = False

    # ---------------------------------------------------------------- faults the tests inject
    def inject_amplifier_fault(self, slider: int) -> None:
        self.amplifier_faults[slider] = True

    def inject_count_jump(self, slider: int, counts: float) -> None:
        """The encoder of ``slider`` skips ``counts`` (a glitch, a loose connector)."""
        self.count_jumps[slider] += counts

    # ---------------------------------------------------------------- Board
    def _writable(self) -> None:
        if self.watchdog_expired:
            raise BoardError("simulated board: the watchdog expired, outputs are protected until it is cleared")

    def open(self) -> None:
        self.duty = np.zeros(SLIDERS)
        self.amplifiers_enabled = self.brakes_released = False

    def set_expiration_states(self) -> None:
        self.expiration_states_set = self.pwm_expiration_set = True

    def start_watchdog(self, timeout: float) -> None:
        self._writable()
        self.watchdog_timeout, self._since_reload = timeout, 0.0

    def start_sampling(self, rate: float) -> None:
        self.sampling = True  # the plant is read directly: starting again discards nothing

    def read(self) -> BoardSample:
        q, qd = self.plant.joint_positions(), self.plant.joint_velocities()
        counts = np.round((q - self._origin) * self.counts_per_metre) + self.count_jumps
        return BoardSample(counts=counts, count_rates=qd * self.counts_per_metre,
                           amplifier_faults=self.amplifier_faults.copy())

    def reload_watchdog(self) -> bool:
        if not self.watchdog_expired:
            self._since_reload = 0.0
        return self.watchdog_expired

    def write_duty(self, duty: np.ndarray) -> None:
        self._writable()
        self.duty = np.clip(np.asarray(duty, dtype=float), -1.0, 1.0)

    def set_amplifiers(self, enabled: bool) -> None:
        self._writable()
        self.amplifiers_enabled = enabled

    def set_brakes(self, released: bool) -> None:
        self._writable()
        if self.brakes_released and not released:
            q, _ = self.plant.plant.true_state
            self.plant.plant.reset(q)  # the brakes stop every slider where it is
        self.brakes_released = released

    def clear_watchdog(self) -> None:
        self.watchdog_expired = False
        self.watchdog_timeout = None
        self._since_reload = 0.0

    def close(self) -> None:
        self.duty = np.zeros(SLIDERS)
        self.amplifiers_enabled = self.brakes_released = False
        self.sampling = False
        self.watchdog_timeout = None
