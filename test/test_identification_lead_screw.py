"""hexapod_identify on drives that are not the package's model, simulated by test/drive_runs.py.

Two runs of the issue's kind (Coulomb friction by direction, a Stribeck hump, viscous ripple with
the screw position, one period of loop delay, encoder quantisation and velocity noise), made by an
independent simulator: run A's joint states carry the applied effort, run B's do not. Judged
against the simulator's own friction law: inertia within 5 %, the friction force along the true
motion at least as close as a plain least-squares fit of the symmetric model (computed here),
Coulomb friction per direction and static friction within 10 % where the chosen model has them,
the right delay (B) or the effort used (A).
"""

import numpy as np
import pytest

from hexapod_control import load_parameters
from hexapod_control.evaluation.bag import load_run
from hexapod_control.identification import identify_bags
from hexapod_control.identification.report import overlay_values
from hexapod_control.identification.samples import aligned_forces, prepare_run
from hexapod_control.model.actuators import ActuatorModel, coulomb_shape

from drive_runs import random_drives, simulate

BASE = load_parameters()
DURATION = 15.0  # [s]
LOOP_DELAY = 1  # [periods]
RELATIVE = 0.10  # Coulomb per direction and static friction
INERTIA = 0.05


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("lead_screw")
    made = {}
    for name, seed, effort in (("A", 1, True), ("B", 2, False)):
        drives = random_drives(seed)
        truth = simulate(folder / name, drives, seed, DURATION, LOOP_DELAY, with_effort=effort)
        result = identify_bags([str(folder / name)], BASE)
        made[name] = (drives, truth, result, folder / name)
    return made


def plain_symmetric_fit(bag, delay: int) -> np.ndarray:
    """(6, 3) J, b, F_c by ordinary least squares on the moving rows, at the true command delay."""
    samples = prepare_run(load_run(bag, BASE.ros.joint_names), BASE, False)
    forces, usable, _ = aligned_forces(samples, delay)
    fitted = np.zeros((6, 3))
    for i in range(6):
        rows = usable & (np.abs(samples.velocity[:, i]) >= BASE.identification.min_speed)
        x = np.column_stack([samples.acceleration[rows, i], samples.velocity[rows, i], samples.coulomb[rows, i]])
        fitted[i] = np.linalg.lstsq(x, forces[rows, i] - samples.rigid[rows, i], rcond=None)[0]
    return fitted


def friction_errors(drives, truth, identified_model, plain) -> tuple[np.ndarray, np.ndarray]:
    """RMS per slider of (model - true) friction along the true motion where it moves, identified and plain."""
    q, qd = truth["q"], truth["qd"]
    moving = np.abs(qd) >= BASE.identification.min_speed
    true = drives.friction(q, qd)
    identified = np.array([identified_model.friction(v, p) for p, v in zip(q, qd)])
    smoothing = np.array(BASE.actuators.coulomb_smoothing_speed)
    simple = plain[:, 1] * qd + plain[:, 2] * coulomb_shape(qd, smoothing)

    def rms(model):
        return np.sqrt(np.sum(np.where(moving, model - true, 0.0) ** 2, axis=0) / moving.sum(axis=0))

    return rms(identified), rms(simple)


def judge(name, runs):
    drives, truth, identified, bag = runs[name]
    result = identified.result
    inertia = np.array([result.estimate("reflected_inertia", i).value for i in range(6)])
    inertia_error = np.abs(inertia / drives.inertia - 1.0)
    values = overlay_values(result, BASE)
    model = ActuatorModel(BASE.actuators.model_copy(update={k: tuple(v) for k, v in values.items()}))
    identified_error, plain_error = friction_errors(drives, truth, model, plain_symmetric_fit(bag, LOOP_DELAY))
    print(f"run {name}: inertia errors {np.round(inertia_error, 4)}; friction RMS identified "
          f"{np.round(identified_error, 3)} N, plain symmetric fit {np.round(plain_error, 3)} N; models {result.choice.chosen}")
    assert all(result.estimate("reflected_inertia", i).identified for i in range(6))
    assert np.all(inertia_error < INERTIA)
    assert np.all(identified_error <= plain_error)
    for i in range(6):
        coulomb = model.coulomb[i]
        if "asymmetry" in result.choice.chosen[i]:
            up, down = coulomb + model.asymmetry[i], coulomb - model.asymmetry[i]
            assert up == pytest.approx(drives.coulomb_positive[i], rel=RELATIVE)
            assert down == pytest.approx(drives.coulomb_negative[i], rel=RELATIVE)
        if model.stribeck_level[i] > 0.0:
            hump = model.stribeck_level[i]
            assert coulomb + model.asymmetry[i] + hump == pytest.approx(
                drives.static_ratio[i] * drives.coulomb_positive[i], rel=RELATIVE)
            assert coulomb - model.asymmetry[i] + hump == pytest.approx(
                drives.static_ratio[i] * drives.coulomb_negative[i], rel=RELATIVE)
    return result


def test_with_the_applied_effort(runs):
    result = judge("A", runs)
    fit = result.runs[0]
    assert fit.source == "effort" and fit.delay == -1  # the effort, read back over the period before its stamp
    assert fit.effort_delay == LOOP_DELAY + 1  # measured: the loop's period, and the read-back's


def test_with_commands_only_the_delay_is_found(runs):
    result = judge("B", runs)
    fit = result.runs[0]
    assert fit.source == "commands" and fit.delay == LOOP_DELAY and fit.effort_delay is None
    assert fit.delay_margin > 1.0


def test_the_lead_screw_terms_are_chosen_on_held_out_rows(runs):
    """Every slider has a direction-dependent Coulomb friction (5-30 %): the choice sees it on held-out rows."""
    for name in ("A", "B"):
        choice = runs[name][2].result.choice
        assert all("asymmetry" in groups for groups in choice.chosen)
        for rms in choice.held_out_rms:
            assert min(rms.values()) < rms["symmetric"]


def test_the_overlay_carries_the_chosen_lead_screw_terms_and_loads(runs, tmp_path):
    from hexapod_control.identification.report import write_overlay, write_report

    identified = runs["B"][2]
    overlay = write_overlay(tmp_path / "lab.yaml", identified, BASE)  # loads it back: it validates
    loaded = load_parameters(overlay).actuators
    values = overlay_values(identified.result, BASE)
    for key in ("coulomb_asymmetry", "stribeck_speed", "static_friction", "viscous_ripple_cos", "viscous_ripple_sin"):
        np.testing.assert_allclose(getattr(loaded, key), values[key], rtol=1e-5, atol=1e-9)
    assert any(loaded.coulomb_asymmetry) and any(loaded.viscous_ripple_sin) and not loaded.symmetric
    report = write_report(tmp_path / "report", identified, BASE, ["B"], overlay)
    text = report.read_text()
    assert "## Friction model per slider (held-out validation)" in text and "residual_speed.png" in text
