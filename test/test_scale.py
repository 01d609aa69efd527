"""Sweeps (hexapod_control/scale): spec expansion, one case's row against independent computations,
and one small sweep on Ray in local mode (Ray's start costs seconds: one test starts it)."""

import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import yaml

from hexapod_control.bags.reader import read_custom_data
from hexapod_control.control import margins
from hexapod_control.errors import ParameterError
from hexapod_control.evaluation.evaluate import evaluate_bags
from hexapod_control.model.hexapod import HexapodModel
from hexapod_control.model.parameters import default_parameters_path, load_parameters
from hexapod_control.scale.case import run_case, with_payload
from hexapod_control.scale.spec import QUANTITIES, expand, load_spec

SHIPPED = str(default_parameters_path())


def write_spec(folder: Path, **sweep) -> Path:
    path = folder / "spec.yaml"
    path.write_text(yaml.safe_dump({"sweep": sweep}))
    return path


def cases_of(folder: Path, **sweep):
    spec, spec_folder = load_spec(write_spec(folder, **sweep))
    return expand(spec, spec_folder)


def outputs(row: dict) -> dict:
    return {key: value for key, value in row.items() if key != "wall_time"}


def test_a_spec_expands_to_every_controller_grid_point_and_sample_with_draws_in_their_ranges(tmp_path):
    cases = cases_of(
        tmp_path, controllers=[{"name": "computed_torque", "gain_set": "robot"}, {"name": "double_loop"}],
        grid={"loop_delay": [0, 1], "payload_mass": [0.0, 1.0, 2.0]},
        random={"sensor_noise": {"uniform": [1e-7, 2e-7]}, "delay_compensation": {"choice": [True, False]}}, samples=4,
    )
    assert len(cases) == 2 * 2 * 3 * 4
    grid_points = {(c.controller, c.values["loop_delay"], c.values["payload_mass"]) for c in cases}
    assert len(grid_points) == 12
    assert all(1e-7 <= c.values["sensor_noise"] <= 2e-7 for c in cases)
    assert {c.values["delay_compensation"] for c in cases} == {True, False}
    assert all(isinstance(c.values["loop_delay"], int) for c in cases)
    assert set(cases[0].values) == set(QUANTITIES)
    assert cases == cases_of(tmp_path, controllers=[{"name": "computed_torque", "gain_set": "robot"}, {"name": "double_loop"}],
                             grid={"loop_delay": [0, 1], "payload_mass": [0.0, 1.0, 2.0]},
                             random={"sensor_noise": {"uniform": [1e-7, 2e-7]},
                                     "delay_compensation": {"choice": [True, False]}}, samples=4)
    assert len({c.seed for c in cases}) == len(cases)
    assert all(np.linalg.norm(c.start) == pytest.approx(0.0005) for c in cases)


def test_a_bad_spec_names_the_file_and_the_key(tmp_path):
    with pytest.raises(ParameterError, match=r"spec\.yaml: .*grid\.payload: unknown quantity"):
        cases_of(tmp_path, controllers=[{"name": "double_loop"}], grid={"payload": [1.0]})
    with pytest.raises(ParameterError, match=r"sweep\.controllers\.0\.name"):
        cases_of(tmp_path, controllers=[{"name": "pid"}])


@pytest.mark.slow
def test_a_case_gives_the_same_row_again_with_noise_jitter_and_drops(tmp_path):
    case = cases_of(tmp_path, controllers=[{"name": "double_loop"}], trajectory="joint_space", duration=0.2,
                    grid={"loop_delay": [1]},
                    random={"sensor_noise": {"uniform": [1e-6, 2e-6]}, "jitter": {"uniform": [0.5, 1.0]},
                            "drop_probability": {"uniform": [0.01, 0.05]}})[0]
    first, second = run_case(case), run_case(case)
    assert first["error"] == "" and first["steps"] == 200
    np.testing.assert_equal(outputs(first), outputs(second))
    other = run_case(replace(case, seed=case.seed + 1))
    assert other["rms_x"] != first["rms_x"]  # the seed reaches the noise and the transport


@pytest.mark.slow
def test_the_quasi_static_error_of_computed_torque_under_a_gravity_mismatch_is_kp_inverse_ja_m_inverse_dg(tmp_path):
    """At rest tau = M_bar J_A^-1 K_P e + g_model balances g_plant: e = K_P^-1 J_A M_bar^-1 (g_plant - g_model)."""
    plant_file = tmp_path / "heavier_gravity.yaml"
    plant_file.write_text(yaml.safe_dump({"extends": SHIPPED, "hexapod": {"gravity": 10.5}}))
    # 1 s: the ramp from the measured pose at arming (trajectories.move.minimum_duration), then settled.
    case = cases_of(tmp_path, controllers=[{"name": "computed_torque", "gain_set": "robot"}], trajectory="hold",
                    duration=1.0, start_offset=0.0, plant_parameters=str(plant_file),
                    grid={"loop_delay": [0], "delay_compensation": [False]}, stability={"window": 0.1})[0]
    row = run_case(case)
    assert row["error"] == "" and row["stable"]
    model, plant = HexapodModel(load_parameters()), HexapodModel(load_parameters(plant_file))
    home = np.array(model.home_q, dtype=float)
    gains = np.array(load_parameters().controllers.computed_torque.position_gain)
    # Independent of the model's assembled terms: J_A by central differences of the forward
    # kinematics, M from the kinetic energy, g as the gradient of the potential energy.
    def central_difference(function, step):
        return np.column_stack([(function(home + h) - function(home - h)) / (2.0 * step) for h in step * np.eye(6)])

    jacobian = central_difference(lambda q: model.forward_kinematics(q).pose, 1e-7)

    def kinetic(speeds):
        return model.energy(home, speeds)[0]

    unit = np.eye(6)
    mass = np.array([[kinetic(unit[i] + unit[j]) - kinetic(unit[i]) - kinetic(unit[j]) if i != j else 2.0 * kinetic(unit[i])
                      for j in range(6)] for i in range(6)])

    def gravity_load(hexapod):
        return central_difference(lambda q: np.atleast_1d(hexapod.energy(q, np.zeros(6))[1]), 1e-6)[0]

    expected = np.linalg.solve(np.diag(gains), jacobian @ np.linalg.solve(mass, gravity_load(plant) - gravity_load(model)))
    measured = np.array([row[f"final_{axis}"] for axis in ("x", "y", "z", "lambda", "mu", "nu")])
    assert abs(expected[2]) > 1e-6  # a real sag, not round-off
    np.testing.assert_allclose(measured, expected, rtol=0.02, atol=1e-3 * np.max(np.abs(expected)))


def test_a_payload_adds_to_the_gravity_load_in_proportion_to_its_mass():
    parameters = load_parameters()
    gravity = {m: HexapodModel(with_payload(parameters, m, 0.05)).gravity_term(HexapodModel(parameters).home_q)
               for m in (0.0, 1.0, 2.0)}
    np.testing.assert_allclose(gravity[2.0] - gravity[0.0], 2.0 * (gravity[1.0] - gravity[0.0]), rtol=1e-9)
    # At the level home pose the six sliders share the extra weight m g through the legs' geometry.
    assert np.all(gravity[1.0] - gravity[0.0] > 0.0) or np.all(gravity[1.0] - gravity[0.0] < 0.0)
    heavier = with_payload(parameters, 1.5, 0.05)
    assert heavier.bodies.platform.mass == pytest.approx(parameters.bodies.platform.mass + 1.5)
    first_moment = parameters.bodies.platform.mass * parameters.geometry.platform_com_offset + 1.5 * (
        parameters.geometry.platform_com_offset + 0.05)
    assert heavier.geometry.platform_com_offset * heavier.bodies.platform.mass == pytest.approx(first_moment)


@pytest.mark.slow
def test_a_row_agrees_with_the_evaluation_of_the_bag_it_records(tmp_path):
    case = cases_of(tmp_path, controllers=[{"name": "computed_torque", "gain_set": "robot"}], trajectory="joint_space",
                    duration=0.6, grid={"loop_delay": [1], "payload_mass": [1.0]})[0]
    bag = tmp_path / "case"
    row = run_case(case, bag)
    assert row["error"] == ""
    assert read_custom_data(bag)["hexapod.controller"] == "computed_torque"
    _, pairs, failed = evaluate_bags([str(bag)], None, tmp_path / "evaluation", model_check=False, make_plots=False)
    assert not failed
    metrics = pairs[0][1]
    assert metrics.position_whole.rms_norm == pytest.approx(row["position_rms"], rel=1e-6)
    assert metrics.orientation_whole.max_norm == pytest.approx(row["orientation_max"], rel=1e-6)
    assert float(np.max(metrics.forces.peak)) == pytest.approx(row["peak_force"], rel=1e-9)


@pytest.mark.slow
def test_a_sweep_on_local_ray_matches_the_cases_run_here_records_failures_and_agrees_with_the_margins(tmp_path):
    pytest.importorskip("ray")
    pyarrow_parquet = pytest.importorskip("pyarrow.parquet")
    from hexapod_control.scale.engine import Engine
    from hexapod_control.scale.sweep import sweep

    spec = write_spec(tmp_path, name="small", trajectory="hold", duration=0.4,
                      controllers=[{"name": "computed_torque", "gain_set": "robot"},
                                   {"name": "computed_torque", "gain_set": "robot", "parameters": "missing.yaml",
                                    "label": "broken"}],
                      grid={"loop_delay": [0, 2], "delay_compensation": [False]}, report={"worst": 1})
    output = tmp_path / "out"
    output.mkdir()
    lines = []
    with Engine(workers=2) as engine:
        report, _ = sweep(spec, output, engine, emit=lines.append)
    assert report.exists() and (output / "report.html").exists()
    assert any("4/4 done, 2 failed" in line for line in lines)
    table = pyarrow_parquet.read_table(output / "cases.parquet").to_pylist()
    assert [r["case"] for r in table] == [0, 1, 2, 3]
    loaded, folder = load_spec(spec)
    cases = expand(loaded, folder)
    for written, case in zip(table[:2], cases[:2]):
        here = outputs(run_case(case))
        np.testing.assert_equal({key: written[key] for key in here}, here)  # NaN (a file's value) equals NaN
    assert all("missing.yaml" in r["error"] for r in table[2:])
    largest = margins.margins(HexapodModel(load_parameters()), max_delay=3, laws=[("computed_torque", "robot")])[0].largest[False]
    for row in table[:2]:
        assert row["stable"] == (row["loop_delay"] <= largest) == row["linear_stable"]
    worst = output / "worst" / f"case_{table[1]['case']}"
    assert read_custom_data(worst)["hexapod.gain_set"] == "robot"


def test_a_map_axis_gives_each_value_its_cell_or_the_range_that_holds_it():
    from hexapod_control.scale.sweep import MAP_CELLS, map_axis

    labels, cell = map_axis([0, 1, 2, 3, 1])
    assert labels == ["0", "1", "2", "3"] and [cell(v) for v in (0, 1, 2, 3)] == [0, 1, 2, 3]
    values = np.random.default_rng(3).uniform(0.0, 2.0, 50)
    labels, cell = map_axis(values)
    assert len(labels) == MAP_CELLS
    width = (values.max() - values.min()) / MAP_CELLS
    for value in values:
        centre = float(labels[cell(value)])
        assert abs(value - centre) <= 0.5 * width * (1 + 1e-9) + 5e-3 * abs(centre)  # labels carry 3 digits


@pytest.mark.slow
def test_bags_evaluated_one_per_task_give_one_report_with_every_bag_and_the_failures(tmp_path):
    from hexapod_control.evaluation.evaluate import SettingsOverrides
    from hexapod_control.scale.evaluate import comparison_report, evaluate_one

    cases = cases_of(tmp_path, controllers=[{"name": "computed_torque", "gain_set": "robot"}], trajectory="joint_space",
                     duration=0.3, grid={"payload_mass": [0.0, 2.0]})
    bags = []
    for case in cases:
        bags.append(tmp_path / f"case_{case.index}")
        run_case(case, bags[-1])
    output = tmp_path / "comparison"
    options = {"params": None, "output": str(output), "topics": None, "joint_names": None, "overrides": SettingsOverrides(),
               "model_check": False, "make_plots": False, "partial": False}
    results = [evaluate_one((str(bag), bag.name), options) for bag in [*bags, tmp_path / "missing"]]
    assert [bool(r.failures) for r in results] == [False, False, True]
    report = comparison_report(results, output, wall=1.0, cpus=1)
    text = report.read_text()
    assert "not evaluated" in text and "missing" in text
    tracking_rows = (output / "table_1_tracking.csv").read_text().splitlines()[1:]
    assert sorted({row.split(",")[0] for row in tracking_rows}) == sorted(bag.name for bag in bags)
    assert len(tracking_rows) == 2 * 8  # per run: six axes and the two norms
    for result, bag in zip(results[:2], bags):
        assert (output / bag.name / "report.md").exists()
        _, pairs, _ = evaluate_bags([str(bag)], None, tmp_path / f"alone_{bag.name}", [bag.name], model_check=False,
                                    make_plots=False)
        alone = pairs[0][1].position_whole.rms_norm * 1e3
        rows = [row for row in result.tables["tracking"].rows if row[0] == bag.name and row[1] == "|e_p|"]
        assert rows[0][3] == pytest.approx(alone, rel=1e-12)


def test_tuning_the_lowest_stable_rate_is_where_the_linearised_loop_turns_stable_and_the_overlay_loads(tmp_path):
    from hexapod_control.scale import tune

    actuators = str(default_parameters_path("hexapod_actuators.yaml"))
    base = load_parameters(actuators)
    point = {"kinematic_scale": 1.5, "velocity_proportional_gain": 4000.0, "integral_ratio": 3.0}
    section = tune.gains_section("double_loop", point, base)
    overlay = tmp_path / "gains.yaml"
    tune.write_overlay(overlay, tune.overlay_document(actuators, "double_loop", section, 2))
    candidate = load_parameters(overlay)
    assert candidate.controllers.double_loop.velocity_integral_gain[0] == pytest.approx(12000.0)
    assert candidate.controllers.double_loop.kinematic_gain[0] == pytest.approx(1.5 * base.controllers.double_loop.kinematic_gain[0])
    assert candidate.controllers.delay_compensation.delay_periods == 2
    without_coulomb = base.replace(actuators={"coulomb_friction": 0.0, "static_friction": 0.0})  # as tune's plants
    lowest = tune.lowest_stable_rate(candidate, [without_coulomb], "double_loop", 2)
    assert tune.LOWEST_RATE_SEARCHED < lowest < candidate.controllers.rate
    # The controller's model without Coulomb friction too, as the tuner linearises it.
    controller = candidate.replace(actuators={"coulomb_friction": 0.0, "static_friction": 0.0})
    bare = controller.replace(controllers={"delay_compensation": {"predictor": "none"}})
    law = margins.linearised_law(HexapodModel(bare), "double_loop", "robot")
    plant, model = margins.linearised_plant(HexapodModel(without_coulomb)), margins.linearised_plant(HexapodModel(controller))

    def radius(rate):
        return margins.spectral_radius(margins.closed_loop(law, plant, model, 1.0 / rate, 2, True)[0])

    assert radius(1.01 * lowest) < 1.0 < radius(0.99 * lowest)


def test_tuning_computed_torque_on_a_plant_with_drives_has_a_finite_lowest_stable_rate():
    """Its inverse dynamics cancels the model's friction: with Coulomb friction's slope at rest left in the
    controller's model and not in the plant's, the linearised loop was unstable at every rate."""
    from hexapod_control.scale import tune

    base = load_parameters(default_parameters_path("hexapod_actuators.yaml"))
    lowest = tune.lowest_stable_rate(base, [tune.without_coulomb_friction(base)], "computed_torque", 2)
    assert tune.LOWEST_RATE_SEARCHED < lowest < base.controllers.rate


def test_a_tuning_trial_unstable_at_the_control_rate_is_infeasible_with_its_reason_not_an_error(tmp_path):
    from hexapod_control.scale import tune

    actuators = str(default_parameters_path("hexapod_actuators.yaml"))
    base = load_parameters(actuators)
    cases = expand(tune.tuning_spec("double_loop", 2, base, 0), tmp_path)
    setting = {"controller": "double_loop", "delay": 2, "params": actuators, "cases": cases}
    point = {"kinematic_scale": 3.0, "velocity_proportional_gain": 20000.0, "integral_ratio": 20.0}
    result = tune.trainable({**point, "setting": setting})
    assert result["feasible"] is False and result["reason"] == "linear margin: unstable at the control rate"
    assert result["objective"] > tune.INFEASIBLE and math.isinf(result["lowest_stable_rate"])


def test_a_tuning_trial_that_raises_is_scored_infeasible_with_its_error(tmp_path):
    from hexapod_control.scale import tune

    setting = {"controller": "double_loop", "delay": 2, "params": str(tmp_path / "missing.yaml"), "cases": []}
    result = tune.trainable({"kinematic_scale": 1.0, "velocity_proportional_gain": 1000.0, "integral_ratio": 1.0,
                             "setting": setting})
    assert result["feasible"] is False and result["objective"] == tune.INFEASIBLE
    assert result["reason"].startswith("error: ") and "missing.yaml" in result["reason"]


@pytest.mark.slow
def test_a_slow_unstable_mode_judged_stable_in_a_short_run_is_listed_with_why(tmp_path):
    """The double loop at 3 periods without compensation: its linear loop grows by 2.7 % a period,
    which 0.1 s at rest, started 0.5 mm off, does not show; the report's disagreement table says so."""
    from hexapod_control.scale.sweep import disagreement_table

    hold_damping = default_parameters_path("hexapod.yaml").parent.parent / "examples" / "sweeps" / "hold_damping_for_3_periods.yaml"
    case = cases_of(tmp_path, parameters=str(hold_damping), trajectory="hold", duration=0.1,
                    controllers=[{"name": "double_loop", "gain_set": "simulated_plant"}],
                    grid={"loop_delay": [3], "delay_compensation": [False]})[0]
    row = run_case(case)
    assert row["error"] == "" and row["stable"] and row["linear_stable"] is False
    table = disagreement_table([row], ["loop_delay"])
    assert len(table.rows) == 1
    why = table.rows[0][-1]
    assert why.startswith("the linear loop's unstable mode grows") and f"{row['steps']} periods" in why
    assert 1.0 < row["linear_radius"] ** row["steps"] < 100.0  # grows, from 0.5 mm to well below the 5 mm bound
