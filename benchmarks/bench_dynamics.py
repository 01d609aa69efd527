"""Timing of the actuator-space dynamics (HexapodModel / ReducedDynamics) per call, in microseconds.

    PYTHONPATH=. python benchmarks/bench_dynamics.py [--calls 2000] [--parameters config/hexapod.yaml]
                                                     [--backend python|c|both]

Two regimes: "fk" follows the validation trajectory (6.82) sampled at 1 kHz, so every call
solves the forward kinematics from the previous sample (the warm start of a control loop);
"phi" passes the passive angles, as a caller that already ran the kinematics does.
Speed is reported, never asserted; the machine's load shows in the p99 column.
--backend selects the generated terms (hexapod_control.model.compiled): the Python module, its compiled
C twin, or both one after the other (default); HEXAPOD_DYNAMICS_BACKEND is ignored here.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import time

import numpy as np

from hexapod_control import HexapodModel, load_parameters
from hexapod_control.model import compiled
from hexapod_control.model import dynamics as dynamics_module

CONTROL_PERIOD = 1e-3  # [s] samples of the trajectory, as in a 1 kHz loop
WARM_UP_CALLS = 200


def validation_trajectory(home: float, t: float):
    """(6.82): q = home + c (1 - exp(-t^3)) sin(omega t) and its derivatives."""
    c = np.array([0.05, 0.08, 0.08, 0.05, 0.08, 0.05])
    omega = np.array([3.0, 3.0, 1.5, 1.5, 0.75, 0.75])
    e = math.exp(-(t**3))
    s, s1, s2 = 1 - e, 3 * t**2 * e, (6 * t - 9 * t**4) * e
    sin, cos = np.sin(omega * t), np.cos(omega * t)
    q = home + c * s * sin
    qd = c * (s1 * sin + s * omega * cos)
    qdd = c * (s2 * sin + 2 * s1 * omega * cos - s * omega**2 * sin)
    return q.tolist(), qd.tolist(), qdd.tolist()


def measure(function, states) -> tuple[float, float]:
    """(median, p99) in microseconds of function(*state) over the states, after a warm-up."""
    for state in states[:WARM_UP_CALLS]:
        function(*state)
    samples = []
    clock = time.perf_counter_ns
    for state in states:
        start = clock()
        function(*state)
        samples.append(clock() - start)
    samples.sort()
    return statistics.median(samples) / 1e3, samples[int(0.99 * (len(samples) - 1))] / 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--parameters", default=None, help="parameters YAML (default: shipped experiments set)")
    parser.add_argument("--backend", choices=("python", "c", "both"), default="both", help="generated terms to time")
    args = parser.parse_args()
    parameters = load_parameters(args.parameters)
    print(f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}")
    for backend in ("python", "c") if args.backend == "both" else (args.backend,):
        start = time.perf_counter()
        terms = compiled.select_backend(backend)
        how = f", {'compiled' if terms.COMPILED else 'cached'} {terms.LIBRARY_PATH}" if backend == "c" else ""
        print(f"\n## backend {backend} (ready in {time.perf_counter() - start:.2f} s{how})")
        dynamics_module.terms = terms  # what ReducedDynamics calls
        run(args, parameters, terms)
    print(f"\nload average {os.getloadavg()[0]:.2f}")


def run(args, parameters, dynamics_terms) -> None:
    model = HexapodModel(parameters)
    fk_state = model.create_state()  # the "fk" column: warm-started FK inside each call
    home = parameters.home_actuator_position
    # Start 1 s into the trajectory so that every actuator moves.
    trajectory = [validation_trajectory(home, 1.0 + k * CONTROL_PERIOD) for k in range(args.calls)]
    phis = []
    for q, _, _ in trajectory:
        phis.append(list(model.kinematics.solve_passive(q, fk_state).phi))
    tau = [model.inverse_dynamics(q, qd, qdd, phi=phi).tolist() for (q, qd, qdd), phi in zip(trajectory, phis)]

    def states(fields):
        return [tuple(fields(k)) for k in range(args.calls)]

    def q_(k):
        return trajectory[k][0]

    def qd_(k):
        return trajectory[k][1]

    def qdd_(k):
        return trajectory[k][2]

    def everything(q, qd, qdd, tau_k, phi=None):
        model.mass_matrix(q, phi=phi, state=fk_state)
        model.velocity_term(q, qd, phi=phi, state=fk_state)
        model.gravity_term(q, phi=phi, state=fk_state)
        model.inverse_dynamics(q, qd, qdd, phi=phi, state=fk_state)
        model.forward_dynamics(q, qd, tau_k, phi=phi, state=fk_state)
        model.energy(q, qd, phi=phi, state=fk_state)

    cases = [
        ("mass_matrix", lambda q, phi=None: model.mass_matrix(q, phi=phi, state=fk_state), lambda k: (q_(k),)),
        ("velocity_term", lambda q, qd, phi=None: model.velocity_term(q, qd, phi=phi, state=fk_state), lambda k: (q_(k), qd_(k))),
        ("gravity_term", lambda q, phi=None: model.gravity_term(q, phi=phi, state=fk_state), lambda k: (q_(k),)),
        (
            "inverse_dynamics",
            lambda q, qd, qdd, phi=None: model.inverse_dynamics(q, qd, qdd, phi=phi, state=fk_state),
            lambda k: (q_(k), qd_(k), qdd_(k)),
        ),
        (
            "forward_dynamics",
            lambda q, qd, t, phi=None: model.forward_dynamics(q, qd, t, phi=phi, state=fk_state),
            lambda k: (q_(k), qd_(k), tau[k]),
        ),
        ("energy", lambda q, qd, phi=None: model.energy(q, qd, phi=phi, state=fk_state), lambda k: (q_(k), qd_(k))),
        ("all six at one state", everything, lambda k: (q_(k), qd_(k), qdd_(k), tau[k])),
    ]
    print(f"parameters: {parameters.source}; {args.calls} calls per row along (6.82) at 1 kHz")
    print(f"{'method':<24}{'fk median':>11}{'fk p99':>9}{'phi median':>12}{'phi p99':>9}   [us]")
    for name, function, fields in cases:
        fk_state.reset()
        with_fk = measure(function, states(fields))
        with_phi = measure(
            lambda *a, f=function: f(*a[:-1], phi=a[-1]),
            states(lambda k, f=fields: (*f(k), phis[k])),
        )
        print(f"{name:<24}{with_fk[0]:>11.1f}{with_fk[1]:>9.1f}{with_phi[0]:>12.1f}{with_phi[1]:>9.1f}")

    # The generated kernels alone (no validation, no forward kinematics).
    packed = model.dynamics._packed
    kernels = [
        ("kernel reduced_inverse_dynamics", dynamics_terms.reduced_inverse_dynamics, lambda k: (q_(k), phis[k], qd_(k), qdd_(k), packed)),
        ("kernel reduced_mass_matrix", dynamics_terms.reduced_mass_matrix, lambda k: (q_(k), phis[k], packed)),
        (
            "kernel reduced_forward_dynamics",
            dynamics_terms.reduced_forward_dynamics,
            lambda k: (q_(k), phis[k], qd_(k), tau[k], packed),
        ),
        (
            "kernel analytic_jacobian_and_convective",
            dynamics_terms.analytic_jacobian_and_convective,
            lambda k: (q_(k), phis[k], qd_(k), packed),
        ),
        ("forward kinematics only", lambda q: model.kinematics.solve_passive(q, fk_state), lambda k: (q_(k),)),
    ]
    for name, function, fields in kernels:
        fk_state.reset()
        median, p99 = measure(function, states(fields))
        print(f"{name:<36}{median:>9.1f}{p99:>9.1f}")


if __name__ == "__main__":
    main()
