"""The embedded plant's C step against its Python step, the reference (simulation/compiled_plant.py).

Two simulators of the same parameters, one on the C step and one on the Python step alone, are
driven by the same feedback law of their own states; they must agree to 1e-12 at every step, with
the C step having done every step. Plants the C code does not have get no C step, and a step it
refuses (a divergence) raises what the Python step raises.
"""

import numpy as np
import pytest

from hexapod_control import load_parameters
from hexapod_control.errors import SimulationDivergedError
from hexapod_control.simulation.embedded import EmbeddedSimulator

DRIVES_FILE = "config/hexapod_actuators.yaml"
STEPS = 1500
# A stiff joint-space PD about a slow sine around home: the sliders move a few centimetres.
STIFFNESS, DAMPING, AMPLITUDE, PHASE_RATE = 800.0, 40.0, 0.02, 5.0  # [N/m], [N*s/m], [m], [rad/s]
AGREEMENT = 1e-12  # [m, m/s, rad]


def parameters_with(path=None, substeps=1, integrator="semi_implicit_euler", actuators=None):
    parameters = load_parameters(path)
    parameters = parameters.replace(simulation={"embedded": {"substeps": substeps, "integrator": integrator}})
    return parameters.replace(actuators=actuators) if actuators else parameters


def feedback(plant: EmbeddedSimulator, hold: np.ndarray, t: float) -> np.ndarray:
    q, qd = plant.true_state
    target = plant.parameters.home_actuator_position + AMPLITUDE * np.sin(PHASE_RATE * t + np.arange(6))
    return hold + STIFFNESS * (target - q) - DAMPING * qd


def run_both(parameters, steps=STEPS, external_from=None):
    compiled, python = EmbeddedSimulator(parameters), EmbeddedSimulator(parameters, compiled=False)
    assert compiled.compiled is not None and python.compiled is None
    home = np.full(6, parameters.home_actuator_position)
    hold = python.model.dynamics.inverse_dynamics(home, np.zeros(6), np.zeros(6))
    largest = 0.0
    for step in range(steps):
        if step == external_from:
            for plant in (compiled, python):
                plant.set_external_forces([3.0, -2.0, 0.0, 1.0, 0.5, -4.0])
        for plant in (compiled, python):
            plant.apply_forces(feedback(plant, hold, plant.time))
            plant.step()
        (q_c, qd_c), (q_p, qd_p) = compiled.true_state, python.true_state
        largest = max(largest, *np.abs(q_c - q_p), *np.abs(qd_c - qd_p),
                      *np.abs(compiled.passive_angles - python.passive_angles))
    return compiled, python, largest


@pytest.mark.parametrize("path", [None, DRIVES_FILE], ids=["rigid", "drives"])
@pytest.mark.parametrize("substeps", [1, 3])
def test_the_c_step_follows_the_python_step(path, substeps):
    compiled, python, largest = run_both(parameters_with(path, substeps), external_from=STEPS // 2)
    assert largest <= AGREEMENT
    assert compiled.compiled.finished == STEPS and not compiled.compiled.deferred
    # The run moved: the comparison is not of two plants at rest.
    assert np.ptp(python.true_state[0]) > 0.0 and np.max(np.abs(python.true_state[1])) > 1e-3
    # The warm starts advanced alike, so the next forward kinematics starts from the same guess.
    for name in ("last_q", "last_phi", "previous_q", "previous_phi"):
        np.testing.assert_allclose(getattr(compiled.kinematic_state, name), getattr(python.kinematic_state, name),
                                   rtol=0.0, atol=AGREEMENT)


@pytest.mark.parametrize(
    "changes",
    [
        {"integrator": "rk4"},
        {"path": DRIVES_FILE, "actuators": {"plant_friction": "stick_slip"}},
        {"path": DRIVES_FILE, "actuators": {"coulomb_asymmetry": [1.0, 0.0, 0.0, 0.0, 0.0, 0.0]}},
    ],
    ids=["rk4", "stick_slip", "lead_screw"],
)
def test_plants_without_a_c_step_run_the_python_step(changes):
    assert EmbeddedSimulator(parameters_with(**changes)).compiled is None


def test_a_diverging_step_raises_as_the_python_step_does():
    parameters = parameters_with().replace(simulation={"embedded": {"max_actuator_speed": 2.0}})
    plants = EmbeddedSimulator(parameters), EmbeddedSimulator(parameters, compiled=False)
    errors = []
    for plant in plants:
        plant.apply_forces(np.full(6, parameters.limits.actuator_force_max))
        with pytest.raises(SimulationDivergedError) as raised:
            plant.step(1000)
        errors.append((str(raised.value), plant.time))
    assert errors[0] == errors[1]
    assert plants[0].compiled.deferred == {"non_finite_output": 1}
    assert plants[0].compiled.finished >= 1  # the steps before the divergence ran in C
