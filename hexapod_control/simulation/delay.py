"""Transport delay of the control loop, as a plant wrapper: forces act periods after they are sent.

On the robot and in Gazebo the loop never closes within a step: the ros2_control driver publishes
the joint state measured at t_k, DDS carries it to the controller node, the node answers, DDS
carries the force back, and the effort controller writes the last command it holds at its next
update. :class:`DelayedPlant` puts that path between a caller and any :class:`Plant`:

* a command sent while the plant is at step k (t_k = k dt, the stamp of the state it answers)
  reaches the effort controller at step k + ``periods`` + e_k and acts from then on; e_k, the
  command's extra latency in whole updates, is floor(u) with u uniform in [0, ``jitter_periods`` + 1):
  with a whole number j of jitter periods a command is late by 0, 1, ..., j updates with equal
  chance (j = 1: every other command, on average, misses its update and waits for the next);
* DDS keeps a publisher's messages in order, so a command never overtakes an earlier one; when
  several arrive by the same update, the newest wins (the effort controller keeps the last);
* a command is lost with probability ``drop_probability``;
* between arrivals the effort controller holds the last command it got (ros2_control's
  JointGroupEffortController does), zero before the first.

``periods = 0`` is the lockstep of the tests so far (the force computed from the state at t_k acts
from t_k); 1 is the best a real 1 kHz loop does. Jitter and drops are drawn from their own
generator seeded with ``simulation.seed``, so a run is reproducible.
"""

from __future__ import annotations

import math
from collections import deque

import numpy as np

from hexapod_control.model.hexapod import JOINT_NAMES
from hexapod_control.model.parameters import HexapodParameters, LoopDelaySettings, SimulationSettings
from hexapod_control.model.validation import as_vector
from hexapod_control.simulation.plant import Plant


class DelayedPlant(Plant):
    """``plant`` behind a transport delay of ``delay_periods`` steps (see the module doc).

    Everything but the force path is the wrapped plant's: time, measurements, and any extra
    attribute (``true_state``, ``platform_pose``, ...) are read through.
    """

    def __init__(self, plant: Plant, delay_periods: int, jitter_periods: float = 0.0,
                 drop_probability: float = 0.0, seed: int = 0):
        settings = LoopDelaySettings(periods=delay_periods, jitter_periods=jitter_periods,
                                     drop_probability=drop_probability)  # validated like the file's keys
        self.plant = plant
        self.dt = plant.dt
        self.delay_periods = settings.periods
        self.jitter_periods = settings.jitter_periods
        self.drop_probability = settings.drop_probability
        self.seed = seed
        self._reset_transport()

    @classmethod
    def from_settings(cls, plant: Plant, settings: SimulationSettings) -> DelayedPlant:
        """``plant`` behind the delay of a parameters file's ``simulation`` section."""
        delay = settings.loop_delay
        return cls(plant, delay.periods, delay.jitter_periods, delay.drop_probability, settings.seed)

    def _reset_transport(self) -> None:
        self._step = 0  # updates of the effort controller so far (= plant steps)
        self._in_flight: deque[tuple[int, tuple[float, ...]]] = deque()  # (arrival step, forces)
        self._last_arrival = 0
        self._rng = np.random.default_rng(self.seed)
        self.sent = self.lost = 0  # commands sent, commands dropped

    @property
    def time(self) -> float:
        return self.plant.time

    def reset(self, q, qd=None) -> None:
        """Reset the plant and empty the line: the effort controller holds zero again."""
        self.plant.reset(q, qd)
        self._reset_transport()

    def apply_forces(self, forces) -> None:
        """Send a command; it acts from step k + periods + e_k on (module doc), unless lost."""
        forces = tuple(as_vector(forces, 6, "forces", JOINT_NAMES))
        self.sent += 1
        # Both draws on every command, so one seed gives the same sequence whatever the settings.
        lost, extra = self._rng.random() < self.drop_probability, self._rng.random() * (self.jitter_periods + 1.0)
        if lost:
            self.lost += 1
            return
        arrival = max(self._step + self.delay_periods + math.floor(extra), self._last_arrival)
        self._last_arrival = arrival
        self._in_flight.append((arrival, forces))

    @property
    def applied_forces(self) -> np.ndarray:
        """The forces acting now: the last command delivered, after the plant's saturation."""
        return self.plant.applied_forces

    @property
    def in_flight(self) -> int:
        """Commands sent and not yet delivered."""
        return len(self._in_flight)

    def transport_state(self) -> tuple[int, int, int, int, list[tuple[int, tuple[float, ...]]]]:
        """(updates so far, last arrival step, commands sent, commands lost, commands in flight as
        (arrival step, forces)), for the compiled lockstep loop (compiled_lockstep.py)."""
        return self._step, self._last_arrival, self.sent, self.lost, list(self._in_flight)

    def upcoming_draws(self, commands: int) -> np.ndarray:
        """The uniform draws of the next ``commands`` commands, two each (drop, then lateness), left
        undrawn: :meth:`restore_transport` draws those of the commands sent."""
        state = self._rng.bit_generator.state
        draws = self._rng.random(2 * commands)
        self._rng.bit_generator.state = state
        return draws

    def restore_transport(self, step: int, last_arrival: int, sent: int, lost: int, in_flight) -> None:
        """Take the transport's state after commands were sent elsewhere (compiled_lockstep.py) with
        the draws of :meth:`upcoming_draws`, which are drawn here."""
        self._rng.random(2 * (sent - self.sent))
        self._step, self._last_arrival, self.sent, self.lost = step, last_arrival, sent, lost
        self._in_flight = deque((arrival, tuple(forces)) for arrival, forces in in_flight)

    def step(self, steps: int = 1) -> None:
        for _ in range(steps):
            delivered = None
            while self._in_flight and self._in_flight[0][0] <= self._step:
                delivered = self._in_flight.popleft()[1]  # the newest arrival wins
            if delivered is not None:
                self.plant.apply_forces(delivered)
            self.plant.step()
            self._step += 1

    def joint_positions(self) -> np.ndarray:
        return self.plant.joint_positions()

    def joint_velocities(self) -> np.ndarray:
        return self.plant.joint_velocities()

    def __getattr__(self, name: str):
        # Only reached for names this class does not define: the wrapped plant's extras.
        if name == "plant":  # not set yet (during __init__): never recurse
            raise AttributeError(name)
        return getattr(self.plant, name)


def with_loop_delay(plant: Plant, settings: SimulationSettings) -> Plant:
    """``plant`` behind the loop delay of ``settings`` (itself when the delay is zero and lossless)."""
    delay = settings.loop_delay
    if delay.periods == 0 and delay.jitter_periods == 0.0 and delay.drop_probability == 0.0:
        return plant
    return DelayedPlant.from_settings(plant, settings)


def loop_delay_words(parameters: HexapodParameters) -> str:
    """The loop delay of ``parameters.simulation`` in words, for reports and bag metadata."""
    delay = parameters.simulation.loop_delay
    return (f"{delay.periods} period(s)"
            + (f", jitter {delay.jitter_periods:g} period(s)" if delay.jitter_periods else "")
            + (f", {100 * delay.drop_probability:g} % of the commands lost" if delay.drop_probability else ""))
