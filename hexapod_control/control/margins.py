"""Delay margins of the controllers: the loop linearised at home, with and without compensation.

    hexapod_margins [--params FILE] [--plant-params FILE] [--max-delay 20]
    python -m hexapod_control.control.margins

For each controller and gain set the closed loop is linearised about the home pose at rest and
sampled at the control period T:

* plant: q_dd = A_q q + A_v q_d + B u, the model's forward dynamics differentiated at home under
  the static force g_bar (gravity stiffness, and the drives' inertia and friction slope when the
  parameters have them), sampled with a zero-order hold over T (the effort controller holds a
  command for a period); ``--plant-params`` takes the plant from another file (a model error);
* delay: d periods of pure delay, d shift states of the six forces;
* control law: the package's own law differentiated at home against a reference resting there
  (computed torque: u = u(q, q_d, reference); double loop: nu_d(q, reference), then the PI
  velocity loop with its integrator), from the controller's parameters;
* compensation: the law acts on the predicted state x^ = Phi_p^d x + sum Phi_p^(d-1-j) Gamma_p
  u_(k-d+j), Phi_p, Gamma_p one semi-implicit Euler step of the controller's linearised model per
  period (the drives' friction taken implicitly), as control/delay_compensation.py integrates it,
  with the reference carried d T ahead
  by its derivatives; the delay is taken as known (the estimator has found it).

Stable means every eigenvalue of the closed loop inside the unit circle. The largest stable delay
is the largest d with every delay up to it stable (at most ``--max-delay``; "> N" when all are).
The predicted tracking error is the steady-state response at the 6.5 trajectory's frequency:
xi_d = Re(c e^(i omega t)) with each axis' amplitude and phase (cos: 1, sin: -i), the error
amplitude E = (I - J H(e^(i omega T))) c of the linear loop, RMS over a period sqrt(sum |E_k|^2 / 2)
over the position and the orientation axes. It is the part of the error the delay and the
sampling cause at home; the nonlinear terms along the path add to it.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.linalg import expm

from hexapod_control.control.controllers import make_controller
from hexapod_control.control.trajectories import Reference
from hexapod_control.model.hexapod import HexapodModel
from hexapod_control.model.parameters import GAIN_SETS, load_parameters
from hexapod_control.options import add_params

N = 6
# Finite-difference steps of the linearisation: far above the forward kinematics' 1e-12 m
# tolerance, far below the motion's scale (central differences, error ~ step^2).
POSITION_STEP = 1e-6  # [m], [rad]
VELOCITY_STEP = 1e-5  # [m/s], [rad/s]
FORCE_STEP = 1e-3  # [N]
ERROR_DELAYS = (1, 2, 3)  # the delays whose tracking error the table predicts
# (controller, gain set) pairs: the computed-torque law has one gain set.
LAWS = (("computed_torque", "robot"), *(("double_loop", gain_set) for gain_set in GAIN_SETS))


@dataclass(frozen=True)
class Plant:
    """The linearised plant at home: q_dd = A_q q + A_v q_d + B u (deviations from rest under g_bar)."""

    a_q: np.ndarray
    a_v: np.ndarray
    b: np.ndarray

    def zero_order_hold(self, period: float) -> tuple[np.ndarray, np.ndarray]:
        """(Phi, Gamma) of x = (q, q_d) over one period with u held."""
        continuous = np.zeros((3 * N, 3 * N))
        continuous[:N, N:2 * N] = np.eye(N)
        continuous[N:2 * N, :N], continuous[N:2 * N, N:2 * N], continuous[N:2 * N, 2 * N:] = self.a_q, self.a_v, self.b
        sampled = expm(continuous * period)
        return sampled[:2 * N, :2 * N], sampled[:2 * N, 2 * N:]

    def semi_implicit_euler(self, period: float) -> tuple[np.ndarray, np.ndarray]:
        """(Phi_p, Gamma_p) of the predictor's step: q_d+ = q_d + T q_dd, q+ = q + T q_d+.

        The velocity terms are taken implicitly, q_dd = (I - T A_v)^-1 (A_q q + A_v q_d + B u): at
        rest A_v is the drives' friction slope alone (C_bar q_d is quadratic), which
        delay_compensation.py integrates implicitly, (M_bar + T D) q_dd = tau - ...; A_v = 0 without drives.
        """
        implicit = np.linalg.inv(np.eye(N) - period * self.a_v)
        velocity = np.hstack((period * implicit @ self.a_q, np.eye(N) + period * implicit @ self.a_v))
        position = np.hstack((np.eye(N), np.zeros((N, N)))) + period * velocity
        b = implicit @ self.b
        return np.vstack((position, velocity)), np.vstack((period * period * b, period * b))


def central_difference(function, steps) -> np.ndarray:
    """The Jacobian of ``function`` at 0, one central difference per entry with its own step."""
    columns = []
    for k, step in enumerate(steps):
        delta = np.zeros(len(steps))
        delta[k] = step
        columns.append((np.asarray(function(delta)) - np.asarray(function(-delta))) / (2.0 * step))
    return np.array(columns).T


def linearised_plant(model: HexapodModel) -> Plant:
    """The model's forward dynamics differentiated at home, at rest, under the static force g_bar."""
    home, rest = model.home_q, np.zeros(N)
    static = model.gravity_term(home)
    state = model.create_state()
    return Plant(
        a_q=central_difference(lambda dq: model.forward_dynamics(home + dq, rest, static, state=state), [POSITION_STEP] * N),
        a_v=central_difference(lambda dv: model.forward_dynamics(home, dv, static, state=state), [VELOCITY_STEP] * N),
        b=central_difference(lambda du: model.forward_dynamics(home, rest, static + du, state=state), [FORCE_STEP] * N),
    )


@dataclass(frozen=True)
class Law:
    """A control law linearised at home: u = -K_x x + F r (+ K_i I for the double loop).

    r = (xi_d, xi_d_dot, xi_d_ddot) deviations (18,). The double loop's velocity error is
    e = -E_x x + G r, its integrator I+ = I + T e and u = K_p e + K_i I.
    """

    name: str
    gain_set: str
    gain: np.ndarray  # K_x (6, 12)
    reference_gain: np.ndarray  # F (6, 18)
    integral_gain: np.ndarray | None = None  # K_i (6,) diagonal, double loop only
    velocity_error: np.ndarray | None = None  # E_x (6, 12)
    velocity_reference: np.ndarray | None = None  # G (6, 18)


def linearised_law(model: HexapodModel, name: str, gain_set: str) -> Law:
    """The package's control law differentiated at home against a reference resting there."""
    home, rest = model.home_q, np.zeros(N)
    centre = model.forward_kinematics(home).pose
    state_steps = [POSITION_STEP] * N + [VELOCITY_STEP] * N
    reference_steps = [POSITION_STEP] * N + [VELOCITY_STEP] * (2 * N)

    def evaluate(dx, dr):
        """(forces, the double loop's velocity error) of a fresh law (integrator 0) at home + dx."""
        controller = make_controller(name, model, gain_set=gain_set)
        controller.reset(0.0, home, rest)
        output = controller.update(0.0, home + dx[:N], rest + dx[N:],
                                   Reference(0.0, centre + dr[:N], dr[N:2 * N], dr[2 * N:]))
        if name != "double_loop":
            return output.forces, None
        return output.forces, controller.desired_joint_velocity - (rest + dx[N:])

    def of_state(part):
        return central_difference(lambda dx: evaluate(dx, np.zeros(3 * N))[part], state_steps)

    def of_reference(part):
        return central_difference(lambda dr: evaluate(np.zeros(2 * N), dr)[part], reference_steps)

    if name != "double_loop":
        return Law(name, gain_set, -of_state(0), of_reference(0))
    integral_gain = np.array(make_controller(name, model, gain_set=gain_set).ki)
    return Law(name, gain_set, -of_state(0), of_reference(0), integral_gain, -of_state(1), of_reference(1))


def closed_loop(law: Law, plant: Plant, model_plant: Plant, period: float, delay: int, compensated: bool,
                ) -> tuple[np.ndarray, np.ndarray]:
    """(A, B): X+ = A X + B r for X = (q, q_d, the d forces in flight (newest first), I)."""
    phi, gamma = plant.zero_order_hold(period)
    integrator = law.integral_gain is not None
    size = 2 * N + delay * N + (N if integrator else 0)
    # The state the law acts on: x itself, or the prediction from x and the forces in flight.
    used = np.zeros((2 * N, size))
    used[:, :2 * N] = np.eye(2 * N)
    reference_map = np.eye(3 * N)  # r -> the reference the law sees
    if compensated and delay:
        phi_p, gamma_p = model_plant.semi_implicit_euler(period)
        used[:, :2 * N] = np.linalg.matrix_power(phi_p, delay)
        for j in range(delay):  # the force acting over [k + j, k + j + 1] was sent d - j periods ago
            slot = 2 * N + (delay - 1 - j) * N
            used[:, slot:slot + N] = np.linalg.matrix_power(phi_p, delay - 1 - j) @ gamma_p
        horizon = delay * period  # the reference carried d T ahead: pose + H v + H^2 a / 2, v + H a
        reference_map = np.eye(3 * N)
        reference_map[:N, N:2 * N], reference_map[:N, 2 * N:] = horizon * np.eye(N), 0.5 * horizon**2 * np.eye(N)
        reference_map[N:2 * N, 2 * N:] = horizon * np.eye(N)
    force = -law.gain @ used  # u = force X + force_reference r
    force_reference = law.reference_gain @ reference_map
    if integrator:
        force[:, -N:] = np.diag(law.integral_gain)
    a, b = np.zeros((size, size)), np.zeros((size, 3 * N))
    applied, applied_reference = (force, force_reference) if delay == 0 else (np.zeros((N, size)), np.zeros((N, 3 * N)))
    if delay:
        applied[:, 2 * N + (delay - 1) * N:2 * N + delay * N] = np.eye(N)  # the oldest force acts
        a[2 * N:3 * N], b[2 * N:3 * N] = force, force_reference  # the new force enters the line
        for j in range(1, delay):
            a[2 * N + j * N:2 * N + (j + 1) * N, 2 * N + (j - 1) * N:2 * N + j * N] = np.eye(N)
    a[:2 * N] = phi @ np.eye(2 * N, size) + gamma @ applied
    b[:2 * N] = gamma @ applied_reference
    if integrator:  # I+ = I + T e, e = -E_x x_used + G r
        a[-N:] = -period * law.velocity_error @ used
        a[-N:, -N:] += np.eye(N)
        b[-N:] = period * law.velocity_reference @ reference_map
    return a, b


def spectral_radius(a: np.ndarray) -> float:
    return float(np.max(np.abs(np.linalg.eigvals(a))))


def largest_stable_delay(law, plant, model_plant, period, compensated, max_delay) -> int | None:
    """Largest d with every delay 0..d stable; -1 when 0 is not; None when all up to max_delay are."""
    for delay in range(max_delay + 1):
        if spectral_radius(closed_loop(law, plant, model_plant, period, delay, compensated)[0]) >= 1.0:
            return delay - 1
    return None


def predicted_error(law, plant, model_plant, period, delay, compensated, jacobian, trajectory) -> tuple[float, float]:
    """RMS (position [m], orientation [rad]) of the steady response to the 6.5 trajectory; inf if unstable."""
    a, b = closed_loop(law, plant, model_plant, period, delay, compensated)
    if spectral_radius(a) >= 1.0:
        return math.inf, math.inf
    omega = trajectory.angular_frequency
    amplitude = np.array([c * (1.0 if w == "cos" else -1j) for c, w in zip(trajectory.amplitudes, trajectory.waveforms)])
    reference = np.concatenate((amplitude, 1j * omega * amplitude, -omega**2 * amplitude))
    z = np.exp(1j * omega * period)
    state = np.linalg.solve(z * np.eye(len(a)) - a, b @ reference)
    error = amplitude - jacobian @ state[:N]
    return float(np.sqrt(np.sum(np.abs(error[:3]) ** 2) / 2.0)), float(np.sqrt(np.sum(np.abs(error[3:]) ** 2) / 2.0))


@dataclass(frozen=True)
class Margins:
    name: str
    gain_set: str
    largest: dict[bool, int | None]  # compensated? -> largest stable delay
    errors: dict[tuple[int, bool], tuple[float, float]]  # (delay, compensated) -> (position, orientation)


def margins(controller_model: HexapodModel, plant_model: HexapodModel | None = None, max_delay: int = 20,
            laws: Sequence[tuple[str, str]] = LAWS) -> list[Margins]:
    """The table's rows (module doc); the plant is the controller's model unless given."""
    parameters = controller_model.parameters
    period = parameters.controllers.period
    model_plant = linearised_plant(controller_model)
    plant = model_plant if plant_model is None else linearised_plant(plant_model)
    jacobian = controller_model.analytic_jacobian(controller_model.home_q).analytic
    trajectory = parameters.trajectories.operational_space
    rows = []
    for name, gain_set in laws:
        law = linearised_law(controller_model, name, gain_set)
        largest = {c: largest_stable_delay(law, plant, model_plant, period, c, max_delay) for c in (False, True)}
        errors = {(d, c): predicted_error(law, plant, model_plant, period, d, c, jacobian, trajectory)
                  for d in ERROR_DELAYS for c in (False, True)}
        rows.append(Margins(name, gain_set, largest, errors))
    return rows


def _delay_text(largest: int | None, max_delay: int) -> str:
    if largest is None:
        return f"> {max_delay}"
    return "unstable at 0" if largest < 0 else str(largest)


def _error_text(error: tuple[float, float]) -> str:
    position, orientation = error
    return "unstable" if math.isinf(position) else f"{position:.1e} m / {orientation:.1e} rad"


def format_table(rows: list[Margins], max_delay: int) -> str:
    header = ["controller", "gain set", "largest stable delay, bare / compensated [periods]"]
    header += [f"error at {d} bare" for d in ERROR_DELAYS] + [f"error at {d} compensated" for d in ERROR_DELAYS]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in rows:
        cells = [row.name, row.gain_set, f"{_delay_text(row.largest[False], max_delay)} / {_delay_text(row.largest[True], max_delay)}"]
        cells += [_error_text(row.errors[(d, False)]) for d in ERROR_DELAYS]
        cells += [_error_text(row.errors[(d, True)]) for d in ERROR_DELAYS]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="hexapod_margins", description=__doc__.splitlines()[0])
    add_params(parser, help="the controllers' parameters file (default: config/hexapod.yaml)")
    parser.add_argument("--plant-params", help="the plant's parameters file (default: the controllers')")
    parser.add_argument("--max-delay", type=int, default=20, help="largest delay examined [periods] (default: %(default)s)")
    args = parser.parse_args(argv)
    if args.max_delay < 0:
        parser.error(f"--max-delay must be >= 0, got {args.max_delay}")
    controller_model = HexapodModel(load_parameters(args.params))
    plant_model = HexapodModel(load_parameters(args.plant_params)) if args.plant_params else None
    rows = margins(controller_model, plant_model, args.max_delay)
    parameters = controller_model.parameters
    print(f"Loop linearised at home, {parameters.controllers.rate:g} Hz, controllers from {parameters.source}, "
          f"plant from {plant_model.parameters.source if plant_model else parameters.source}; tracking error of "
          f"the 6.5 trajectory at {parameters.trajectories.operational_space.angular_frequency:.4g} rad/s (RMS).")
    print(format_table(rows, args.max_delay))
    return 0


if __name__ == "__main__":
    sys.exit(main())
