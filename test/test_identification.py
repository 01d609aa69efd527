"""hexapod_identify on bags simulated with known drives: values, intervals, residual, and refusals.

The bags come from the embedded plant with drives the identification does not know (values that
differ per slider, a payload on the platform), the sensor model's noise and quantisation, the
loop delay of one period (config/hexapod.yaml, simulation/delay.py) and a collision-like force
pulse; the controller runs on config/hexapod.yaml, which has no drives. Tolerances: inertia within
5 %, friction within 10 %, payload within 0.05 kg; the measured errors are in the comments.
"""

import numpy as np
import pytest
import yaml

from hexapod_control import load_parameters
from hexapod_control.identification import identify_bags
from hexapod_control.identification.cli import NOTHING_IDENTIFIED, main
from hexapod_control.identification.regression import DRIVE_PARAMETERS, PAYLOAD, identify_samples
from hexapod_control.identification.samples import RunSamples
from hexapod_control.identification.simulated_run import record_simulated_run
from hexapod_control.model.parameters import default_parameters_path

BASE = load_parameters()
TRUE_DRIVES = {
    "reflected_inertia": [3.5, 3.9, 4.2, 4.0, 3.7, 4.4],  # [kg]
    "viscous_friction": [30.0, 35.0, 40.0, 45.0, 50.0, 38.0],  # [N*s/m]
    "coulomb_friction": [10.0, 12.0, 14.0, 16.0, 13.0, 11.0],  # [N]
    "static_friction": 20.0,
}
TRUE_PAYLOAD = 0.5  # [kg] on the platform of the plant, not of the model
SENSOR = {"encoder_resolution": 1e-6, "noise_std": 2e-6, "delay_steps": 0}  # [m]
EXCITATION_DURATION = 10.0  # [s]: the ~2 s ramp and two periods of the 4 s excitation
TOLERANCE = {"reflected_inertia": 0.05, "viscous_friction": 0.10, "coulomb_friction": 0.10}  # relative
PAYLOAD_TOLERANCE = 0.05  # [kg]
# A collision: 40 N against slider 2 for 30 ms in the middle of the run, which the outlier rejection removes.
PULSE_SLIDER, PULSE_FORCE, PULSE_START, PULSE_LENGTH = 2, 40.0, 5.0, 0.03  # slider 2 at > 0.08 m/s then
EXCITATION_WINDOW = BASE.identification.derivative_window  # [s] the filter spreads the pulse over this much more


def plant_parameters():
    platform = BASE.bodies.platform
    return load_parameters(default_parameters_path("hexapod_actuators.yaml")).replace(
        actuators=TRUE_DRIVES,
        bodies={"platform": {"mass": platform.mass + TRUE_PAYLOAD}},
        simulation={"sensor": SENSOR},
    )


def pulse(t):
    if PULSE_START <= t < PULSE_START + PULSE_LENGTH:
        forces = np.zeros(6)
        forces[PULSE_SLIDER] = PULSE_FORCE
        return forces
    return None


@pytest.fixture(scope="module")
def excitation_bag(tmp_path_factory):
    path = tmp_path_factory.mktemp("identification") / "excitation"
    summary = record_simulated_run(plant_parameters(), BASE, path, EXCITATION_DURATION, external_forces=pulse)
    assert summary["failure"] == ""
    return path


@pytest.fixture(scope="module")
def identified(excitation_bag):
    return identify_bags([str(excitation_bag)], BASE, with_payload=True)


def test_identifies_the_injected_drives_and_payload(identified):
    result = identified.result
    assert identified.skipped == []
    # The bag's joint states carry the applied force: the fit uses it, read back over the period
    # before each stamp, and measures the command-to-effort delay (the loop's, plus that period).
    assert [(fit.source, fit.delay) for fit in result.runs] == [("effort", -1)]
    assert [fit.effort_delay for fit in result.runs] == [BASE.simulation.loop_delay.periods + 1]
    assert result.choice.chosen == [()] * 6  # the package's own law: no lead-screw term is worth its columns
    worst = {}
    for estimate in result.estimates:
        assert estimate.identified, estimate.reason
        if estimate.name == PAYLOAD:
            assert abs(estimate.value - TRUE_PAYLOAD) < PAYLOAD_TOLERANCE
            continue
        true = TRUE_DRIVES[estimate.name][estimate.slider]
        error = abs(estimate.value - true) / true
        worst[estimate.name] = max(worst.get(estimate.name, 0.0), error)
        assert error < TOLERANCE[estimate.name], (estimate, true)
    print(f"worst relative errors {worst}, payload {result.estimate(PAYLOAD).value:.4f} kg")
    # Measured: inertia 0.16 %, viscous 0.05 %, Coulomb 0.05 % (worst slider), payload 0.4 g off; no
    # lead-screw term chosen. (Before the robust fit and the 5 mm/s rows: 0.25 %, 0.09 %, 0.07 %.)
    # The collision: its slider's rows while it lasts are in the fit, weighed down (Huber), not cut.
    fit = result.runs[0]
    during = (fit.t >= PULSE_START) & (fit.t < PULSE_START + PULSE_LENGTH)
    assert fit.rows[during, PULSE_SLIDER].sum() > 0.5 * PULSE_LENGTH / BASE.simulation.dt
    assert result.counts.downweighted[PULSE_SLIDER] >= fit.rows[during, PULSE_SLIDER].sum()


def test_force_residual_drops_to_the_noise_level(identified):
    """After the fit, the residual is that of the true drives on the same rows (the noise floor)."""
    result, samples = identified.result, identified.runs[0]
    fit = result.runs[0]
    truth = np.column_stack([TRUE_DRIVES[name] for name in DRIVE_PARAMETERS])  # (6, 3)
    true_forces = (
        samples.rigid + TRUE_PAYLOAD * samples.payload
        + truth[:, 0] * samples.acceleration + truth[:, 1] * samples.velocity + truth[:, 2] * samples.coulomb
    )
    # The collision's rows are in the fit (weighed down); outside them the residual is the noise.
    collision = (fit.t >= PULSE_START - EXCITATION_WINDOW) & (fit.t < PULSE_START + PULSE_LENGTH + EXCITATION_WINDOW)
    rows = fit.rows & ~collision[:, None]

    def rms(predicted):
        return np.sqrt(np.sum(np.where(rows, fit.measured - predicted, 0.0) ** 2, axis=0) / rows.sum(axis=0))

    floor, before, after = rms(true_forces), rms(fit.before), rms(fit.after)
    print(f"residual RMS before {before}, after {after}, true drives {floor} [N]")
    assert np.all(after <= 1.05 * floor)
    # Measured: 12.5-19.4 N before, 0.033-0.040 N after, 0.034-0.042 N with the true drives.
    assert np.all(before > 50.0 * after)


def test_command_writes_an_overlay_that_loads_and_a_report(excitation_bag, tmp_path, capsys):
    overlay = tmp_path / "lab" / "drives.yaml"
    assert main([str(excitation_bag), "-o", str(overlay), "--payload"]) == 0
    out = capsys.readouterr().out
    assert "report:" in out and "overlay:" in out
    loaded = load_parameters(overlay)
    document = yaml.safe_load(overlay.read_text())
    assert (overlay.parent / document["extends"]).resolve() == default_parameters_path().resolve()
    for name in DRIVE_PARAMETERS:
        np.testing.assert_allclose(getattr(loaded.actuators, name), TRUE_DRIVES[name], rtol=TOLERANCE[name])
    assert all(s >= c for s, c in zip(loaded.actuators.static_friction, loaded.actuators.coulomb_friction))
    assert loaded.bodies.platform.mass == pytest.approx(BASE.bodies.platform.mass + TRUE_PAYLOAD, abs=PAYLOAD_TOLERANCE)
    assert loaded.geometry == BASE.geometry and loaded.controllers == BASE.controllers  # nothing else changed
    report = tmp_path / "lab" / "drives_report"
    text = (report / "report.md").read_text()
    assert "not identifiable" not in text
    for figure in ("forces.png", "residuals.png", "residual_speed.png"):
        assert (report / figure).stat().st_size > 10_000


def test_a_robot_at_rest_identifies_nothing(tmp_path, capsys):
    bag = tmp_path / "hold"
    still = BASE.replace(trajectories={"excitation": {"amplitudes": 1e-4}})  # a "run" of 0.1 mm
    assert record_simulated_run(plant_parameters(), still, bag, 3.0)["failure"] == ""
    overlay = tmp_path / "drives.yaml"
    assert main([str(bag), "-o", str(overlay), "--params", str(default_parameters_path())]) == NOTHING_IDENTIFIED
    assert not overlay.exists()
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("slider_")]
    assert len(lines) == 18  # three parameters of six sliders, and not one number among them
    assert all("not identifiable: too few samples" in line and "slower than min_speed" in line for line in lines)


def test_saturation_is_named_instead_of_a_number(tmp_path, capsys):
    """A controller held to 12 N on drives that need ~35 N: every moving row of every slider saturates."""
    bag = tmp_path / "saturated"
    weak = {"actuator_force_max": 12.0}  # above the 8.6 N the excitation needs without drives
    # Pinned at its limit the run would be held by the supervisor's saturation row within
    # max_saturation_time: a weak drive is what this run is about, so the row waits past its end.
    patient = {"max_saturation_time": 10.0}
    assert record_simulated_run(plant_parameters().replace(limits=weak),
                                BASE.replace(limits=weak, safety=patient), bag, 4.5)["failure"] == ""
    params = tmp_path / "weak.yaml"
    # Rows from 0.02 m/s on: there every moving row saturates (slower ones, near the reversals, do not).
    params.write_text(f"extends: {default_parameters_path()}\nhexapod:\n  limits: {{actuator_force_max: 12.0}}\n"
                      "  identification: {min_speed: 0.02}\n")
    assert main([str(bag), "-o", str(tmp_path / "drives.yaml"), "--params", str(params)]) == NOTHING_IDENTIFIED
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("slider_")]
    assert len(lines) == 18 and all("not identifiable: saturation" in line for line in lines)


# ------------------------------------------------------------------------------------------ synthetic rows
PERIOD = 1e-3  # [s]
SMOOTHING_SPEED = 0.002  # [m/s]


def columns_at(t):
    """Slider 0 slides at a constant 0.1 m/s; the others swing at their own frequencies."""
    omega = np.array([0.0, 3.0, 5.0, 7.0, 4.0, 6.0])
    velocity = 0.2 * np.cos(omega * t[:, None])
    acceleration = -0.2 * omega * np.sin(omega * t[:, None])
    velocity[:, 0], acceleration[:, 0] = 0.1, 0.0
    return acceleration, velocity, np.tanh(velocity / SMOOTHING_SPEED)


def synthetic_run(seed=0, noise=0.05):
    """Rows built by hand: rigid forces zero, drive forces of TRUE_DRIVES plus white noise [N].

    The force of grid point k is the mean of the commands k-1 and k (samples.aligned_forces), so
    the commands are the drive forces half a period later.
    """
    n = 20_000
    t = np.arange(n) * PERIOD
    theta = np.column_stack([TRUE_DRIVES[name] for name in DRIVE_PARAMETERS])  # (6, 3)
    late = columns_at(t + 0.5 * PERIOD)
    commands = sum(theta[:, j] * late[j] for j in range(3)) + np.random.default_rng(seed).normal(0.0, noise, (n, 6))
    acceleration, velocity, coulomb = columns_at(t)
    position = np.cumsum(velocity, axis=0) * PERIOD
    angle = 2.0 * np.pi / BASE.actuators.viscous_ripple_period * position
    return RunSamples(
        label="synthetic", period=PERIOD, window=41, t=t, valid=np.ones(n, dtype=bool),
        position=position, velocity=velocity, acceleration=acceleration, coulomb=coulomb,
        forces=commands, commanded=np.ones(n, dtype=bool), saturated=np.zeros((n, 6), dtype=bool),
        rigid=np.zeros((n, 6)), payload=None, asymmetry=np.abs(coulomb),
        ripple=np.stack([velocity * np.cos(angle), velocity * np.sin(angle)]),
        raw_velocity=velocity, raw_shape=coulomb, filter_order=BASE.identification.derivative_order,
    )


def test_poor_excitation_is_named_instead_of_a_number():
    """Slider 0 at constant speed: no acceleration (J), and b and F_c see one and the same column."""
    parameters = BASE.replace(identification={"max_delay_steps": 0})
    result = identify_samples([synthetic_run()], parameters, with_payload=False)
    for name in DRIVE_PARAMETERS:
        estimate = result.estimate(name, 0)
        assert not estimate.identified and estimate.reason.startswith("poor excitation"), estimate
    for slider in range(1, 6):
        for name in DRIVE_PARAMETERS:
            estimate = result.estimate(name, slider)
            assert estimate.identified, estimate.reason
            # White noise and exact columns: the intervals hold the truth (3 half-widths: 99.99 %).
            assert abs(estimate.value - TRUE_DRIVES[name][slider]) <= 3.0 * estimate.half_width, estimate
