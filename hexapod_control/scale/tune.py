"""Gain tuning: gains for a plant and a loop delay, by Ray Tune with Optuna's TPE search.

    hexapod_tune --params FILE [--plant-params FILE] --controller double_loop --delay 2 [--trials 40]
        [-o DIR] [--force] [--address HOST:PORT] [--workers N]
    python -m hexapod_control.scale.tune ...

``--params``: the controller's parameters, i.e. the robot's file with its identification overlay
(config/hexapod_actuators.yaml is such a file); ``--plant-params``: the simulated plant (default the
same). The loop runs ``--delay`` periods late, which the model predictor compensates (the delay
taken as known).

A trial sets the gains (double loop: a scale of the kinematic gains K, K_p, K_i / K_p; computed
torque: scales of K_P and K_V for the position and the orientation axes), then:

1. constraints of the linearised loop (control/margins.py, each plant of the tuning sweep and the
   controller's model without their Coulomb friction, whose slope at rest damps a resting slider
   only, as the shipped ``valid_rates`` were found; computed torque, which cancels its model's
   friction, would otherwise cancel a damping no plant has): the gains' ``valid_rates.min`` is
   RATE_MARGIN x the lowest rate at
   which that loop is stable, rounded up to :data:`RATE_ROUNDING` (the shipped files' rule); it must
   lie below the control rate (the supervisor arms only at a measured rate within the range) and
   keep the supervisor's HOLD damper stable (the controller refuses it otherwise);
2. the tuning sweep in closed loop (payload x reflected inertia around the plant's, at the delay):
   every case stable, no force at the limit, no slider faster than ``limits.actuator_speed_max``;
3. objective: the mean over the cases of position RMS + :data:`LENGTH_SCALE` x orientation RMS.

A trial that breaks a constraint scores :data:`INFEASIBLE` plus how far it broke it, so the search
learns where the edge is; a trial that raises scores INFEASIBLE with its error as the reason. The
shipped gains are the first trial, and they stay unless a trial beats their objective by
:data:`MIN_IMPROVEMENT` (a gain set that is better only within the sweep's noise is not worth a
change on the robot; the report says which). The best gains go to
``gains.yaml``, an overlay that ``load_parameters`` accepts (it extends ``--params``), and both
sets run the held-out sweep (other payloads, drives, jitter and noise, other seeds); ``report.md``
compares them.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np
import yaml

from hexapod_control.control import margins
from hexapod_control.control.controllers import CONTROLLER_NAMES
from hexapod_control.errors import HexapodError
from hexapod_control.evaluation.document import Document, Table
from hexapod_control.evaluation.evaluate import prepare_output
from hexapod_control.model.hexapod import HexapodModel
from hexapod_control.model.parameters import EXTENDS_KEY, ROOT_KEY, HexapodParameters, load_parameters
from hexapod_control.options import add_output, add_params
from hexapod_control.scale.case import plant_parameters, run_case
from hexapod_control.scale.engine import Engine
from hexapod_control.scale.spec import Case, SweepSpec, expand
from hexapod_control.scale.sweep import add_engine_arguments, run_cases, write_rows

PROG = "hexapod_tune"
GAIN_SET = "robot"  # the tuned gains are the robot's: the plant is the robot's model with its drives
RATE_MARGIN = 1.5  # valid_rates.min = this x the lowest stable rate (the shipped files' rule)
RATE_ROUNDING = 50.0  # [Hz] valid_rates.min rounded up to this
RATE_TOP = 10.0  # valid_rates.max = this x controllers.rate (the top of the shipped files' sweep)
LOWEST_RATE_SEARCHED = 10.0  # [Hz] below this a loop counts as stable everywhere
RATE_BISECTIONS = 16
# An angle error times this is the displacement it causes at the platform's joints (the platform
# triangle's circumradius, L_B / 2 / sqrt 3 = 0.25 m): one objective over position and orientation.
LENGTH_SCALE = 0.25  # [m/rad]
INFEASIBLE = 1.0  # [m] the objective of a trial that breaks a constraint, plus how far it broke it
MIN_IMPROVEMENT = 0.05  # a tuned set replaces the shipped one only with an objective this much lower
TUNE_FILES = ("gains.yaml", "report.md", "report.html", "tuning.parquet", "tuning.csv", "held_out.parquet", "held_out.csv")
# Search space: name -> (low, high), sampled log-uniformly; each multiplies a shipped gain unless
# named otherwise. The shipped set is (1, 1, ...) and the first trial.
SPACES = {
    "double_loop": {"kinematic_scale": (0.3, 3.0), "velocity_proportional_gain": (300.0, 20000.0),
                    "integral_ratio": (0.2, 20.0)},  # K_i / K_p [1/s]
    "computed_torque": {"position_kp_scale": (0.1, 4.0), "position_kv_scale": (0.25, 4.0),
                        "orientation_kp_scale": (0.1, 4.0), "orientation_kv_scale": (0.25, 4.0)},
}


# ------------------------------------------------------------------------------------------ gains
def shipped_point(controller: str, parameters: HexapodParameters) -> dict:
    if controller == "double_loop":
        settings = parameters.controllers.double_loop
        kp = settings.velocity_proportional_gain[0]
        return {"kinematic_scale": 1.0, "velocity_proportional_gain": kp,
                "integral_ratio": settings.velocity_integral_gain[0] / kp}
    return {name: 1.0 for name in SPACES["computed_torque"]}


def gains_section(controller: str, point: dict, parameters: HexapodParameters) -> dict:
    """The ``controllers.<controller>`` keys of a point of the search space (valid_rates aside)."""
    if controller == "double_loop":
        kp = point["velocity_proportional_gain"]
        kinematic = [point["kinematic_scale"] * k for k in parameters.controllers.double_loop.kinematic_gain]
        return {"kinematic_gain": kinematic, "velocity_proportional_gain": kp,
                "velocity_integral_gain": point["integral_ratio"] * kp}
    shipped = parameters.controllers.computed_torque
    groups = ("position",) * 3 + ("orientation",) * 3
    return {"position_gain": [point[f"{g}_kp_scale"] * k for g, k in zip(groups, shipped.position_gain)],
            "velocity_gain": [point[f"{g}_kv_scale"] * k for g, k in zip(groups, shipped.velocity_gain)]}


def overlay_document(base_file: str, controller: str, section: dict, delay: int) -> dict:
    """An overlay of ``base_file`` (by its absolute path) with the gains and the compensated delay."""
    return {
        EXTENDS_KEY: str(Path(base_file).resolve()),
        ROOT_KEY: {"controllers": {controller: section,
                                   "delay_compensation": {"predictor": "model", "delay_periods": delay}}},
    }


def write_overlay(path: Path, document: dict, header: str = "") -> Path:
    path.write_text(header + yaml.safe_dump(document, sort_keys=False))
    return path


# ------------------------------------------------------------------------------------------ linear margins
def without_coulomb_friction(parameters: HexapodParameters) -> HexapodParameters:
    return parameters.replace(actuators={"coulomb_friction": 0.0, "static_friction": 0.0})


def linear_plant_models(cases: Sequence[Case]) -> list[HexapodParameters]:
    """The distinct plants of the cases, without Coulomb friction (module doc)."""
    plants = {without_coulomb_friction(plant_parameters(case)) for case in cases}
    return sorted(plants, key=lambda p: (p.bodies.platform.mass, p.actuators.reflected_inertia))


def lowest_stable_rate(controller_parameters: HexapodParameters, plants: Sequence[HexapodParameters],
                       controller: str, delay: int) -> float:
    """The lowest rate [Hz] at which the linearised loop is stable on every plant (bisection in log
    rate); infinite when it is unstable at the control rate itself."""
    controller_parameters = without_coulomb_friction(controller_parameters)
    model = HexapodModel(controller_parameters)
    bare = controller_parameters.replace(controllers={"delay_compensation": {"predictor": "none"}})
    law = margins.linearised_law(HexapodModel(bare), controller, GAIN_SET)
    model_plant = margins.linearised_plant(model)
    linear_plants = [margins.linearised_plant(HexapodModel(p)) for p in plants]

    def stable(rate: float) -> bool:
        return all(margins.spectral_radius(margins.closed_loop(law, plant, model_plant, 1.0 / rate, delay, True)[0]) < 1.0
                   for plant in linear_plants)

    rate = controller_parameters.controllers.rate
    if not stable(rate):
        return math.inf
    low, high = LOWEST_RATE_SEARCHED, rate
    if stable(low):
        return low
    for _ in range(RATE_BISECTIONS):
        middle = math.sqrt(low * high)
        low, high = (low, middle) if stable(middle) else (middle, high)
    return high


def valid_rates(lowest: float, rate: float) -> dict:
    return {"min": math.ceil(RATE_MARGIN * lowest / RATE_ROUNDING) * RATE_ROUNDING, "max": RATE_TOP * rate}


# ------------------------------------------------------------------------------------------ one trial
def evaluate_gains(point: dict, setting: dict) -> dict:
    """A trial (module doc): the objective, whether the gains are feasible, and why not."""
    with tempfile.TemporaryDirectory(prefix="hexapod_tune_") as folder:
        return _evaluate_gains(point, setting, Path(folder))


def infeasible(reason: str) -> dict:
    """The outcome of a trial that broke a constraint or failed, before any metric."""
    return {"objective": INFEASIBLE, "feasible": False, "reason": reason, "lowest_stable_rate": math.nan,
            "position_rms": math.nan, "orientation_rms": math.nan}


def _evaluate_gains(point: dict, setting: dict, folder: Path) -> dict:
    controller, delay = setting["controller"], setting["delay"]
    base = load_parameters(setting["params"])
    section = gains_section(controller, point, base)
    probe = write_overlay(folder / "gains.yaml", overlay_document(setting["params"], controller, section, delay))
    result = infeasible("")
    cases = [replace(case, parameters_file=str(probe)) for case in setting["cases"]]
    try:
        candidate = load_parameters(probe)
        rate = candidate.controllers.rate
        lowest = lowest_stable_rate(candidate, linear_plant_models(cases), controller, delay)
        result["lowest_stable_rate"] = lowest
        # The supervisor arms only at a measured rate within valid_rates: a min at the control rate
        # itself would refuse a driver a hair slow.
        if not (math.isfinite(lowest) and valid_rates(lowest, rate)["min"] < rate):
            result["objective"] = INFEASIBLE + min(RATE_MARGIN * lowest / rate, RATE_TOP)
            result["reason"] = (f"linear margin: stable from {lowest:.0f} Hz only" if math.isfinite(lowest)
                                else "linear margin: unstable at the control rate")
            return result
        section["valid_rates"] = valid_rates(lowest, rate)
        write_overlay(probe, overlay_document(setting["params"], controller, section, delay))
        rows = [run_case(case) for case in cases]
    except HexapodError as error:
        result["reason"] = " ".join(str(error).split())
        return result
    limits = base.limits
    broken = [r for r in rows if r["error"] or not r["stable"] or r["saturated_time"] > 0.0
              or r["peak_speed"] > limits.actuator_speed_max]
    if broken:  # a case that failed has no metrics: judge before averaging them
        r = broken[0]
        result["reason"] = (r["error"] or ("unstable" if not r["stable"] else "saturated" if r["saturated_time"] > 0 else
                                           f"speed {r['peak_speed']:.2f} m/s"))
        result["objective"] = INFEASIBLE + len(broken) / len(rows)
        return result
    result["position_rms"] = float(np.mean([r["position_rms"] for r in rows]))
    result["orientation_rms"] = float(np.mean([r["orientation_rms"] for r in rows]))
    score = float(np.mean([r["position_rms"] + LENGTH_SCALE * r["orientation_rms"] for r in rows]))
    result.update(objective=score, feasible=True, valid_rates_min=section["valid_rates"]["min"])
    return result


def trainable(config: dict) -> dict:
    """Ray Tune's function: the setting travels in the config under "setting" (a constant). A trial
    that raises is scored infeasible with its error, so the search goes on and the tables show why."""
    setting = config["setting"]
    point = {key: value for key, value in config.items() if key != "setting"}
    try:
        return evaluate_gains(point, setting)
    except Exception as error:  # noqa: BLE001 - any failure of one trial is that trial's result
        return infeasible(f"error: {type(error).__name__}: {error}")


# ------------------------------------------------------------------------------------------ sweeps
def tuning_spec(controller: str, delay: int, plant: HexapodParameters, seed: int) -> SweepSpec:
    """The plant's uncertainty the objective averages over: payload x reflected inertia about the plant's,
    each case with jitter and sensor noise (gains that only work on an exact period do not pass)."""
    inertia = plant.actuators.reflected_inertia[0]
    return SweepSpec.model_validate({
        "name": "tuning", "trajectory": "joint_space", "duration": 1.5, "seed": seed, "linear_analysis": False,
        "controllers": [{"name": controller, "gain_set": GAIN_SET}],
        "grid": {"loop_delay": [delay], "delay_compensation": [True], "payload_mass": [0.0, 2.0],
                 "reflected_inertia": [0.8 * inertia, 1.2 * inertia], "jitter": [0.5], "sensor_noise": [1e-6]},
    })


def held_out_spec(controller: str, delay: int, plant: HexapodParameters, seed: int) -> SweepSpec:
    """Other payloads and drives than the tuning sweep's, with jitter and noise, other seeds; the
    payloads on a grid, so that the light and the heavy end are both held out whatever the draws."""
    drives = plant.actuators
    return SweepSpec.model_validate({
        "name": "held_out", "trajectory": "joint_space", "duration": 3.0, "seed": seed + 1, "samples": 4,
        "controllers": [{"name": controller, "gain_set": GAIN_SET}],
        "grid": {"loop_delay": [delay], "delay_compensation": [True], "payload_mass": [0.0, 1.0, 2.0]},
        "random": {"reflected_inertia": {"uniform": [0.7 * drives.reflected_inertia[0], 1.3 * drives.reflected_inertia[0]]},
                   "viscous_friction": {"uniform": [0.7 * drives.viscous_friction[0], 1.3 * drives.viscous_friction[0]]},
                   "jitter": {"uniform": [0.0, 0.5]}, "sensor_noise": {"uniform": [0.0, 2e-6]}},
    })


TRIAL_COLUMNS = ("objective", "feasible", "reason", "lowest_stable_rate", "position_rms", "orientation_rms")


def trial_row(result) -> dict:
    """A trial's point and outcome from Ray Tune's result; a trial whose worker died is infeasible, its error the reason."""
    point = {k: v for k, v in (result.config or {}).items() if k != "setting"}
    if result.metrics and "objective" in result.metrics:
        return {**point, **{k: result.metrics.get(k) for k in TRIAL_COLUMNS}}
    reason = " ".join(f"error: {result.error}".split()) if result.error is not None else "error: no result"
    return {**point, **infeasible(reason)}


def shipped_trial(trials: Sequence[dict], controller: str, parameters: HexapodParameters) -> dict | None:
    """The trial of the shipped gains (the first point evaluated), if it ran."""
    point = shipped_point(controller, parameters)
    return next((t for t in trials if all(t.get(k) is not None and math.isclose(t[k], v) for k, v in point.items())), None)


def _summary(rows: Sequence[dict], label: str) -> list:
    ran = [r for r in rows if not r["error"]]
    if not ran:
        return [label, len(rows), 0, *[None] * 7]
    position = np.array([r["position_rms"] for r in ran]) * 1e3
    orientation = np.array([r["orientation_rms"] for r in ran]) * 1e3
    return [label, len(rows), sum(1 for r in ran if r["stable"]), float(np.mean(position)), float(np.percentile(position, 90)),
            float(np.max(position)), float(np.mean(orientation)), float(np.max(orientation)),
            float(np.max([r["peak_force"] for r in ran])), float(np.max([r["saturated_time"] for r in ran]))]


# ------------------------------------------------------------------------------------------ main
def build_parser(parser: argparse.ArgumentParser | None = None) -> argparse.ArgumentParser:
    parser = parser or argparse.ArgumentParser(prog=PROG, description=__doc__.splitlines()[0])
    add_params(parser, "the controller's parameters: the robot's file with its identification overlay",
               type=Path, required=True)
    parser.add_argument("--plant-params", type=Path, help="the simulated plant's parameters (default: --params)")
    parser.add_argument("--controller", choices=CONTROLLER_NAMES, required=True)
    parser.add_argument("--delay", type=int, required=True, help="loop delay [periods], compensated")
    parser.add_argument("--trials", type=int, default=40, help="gain sets tried (default: %(default)s)")
    parser.add_argument("--seed", type=int, default=0, help="of the search and the sweeps (default: %(default)s)")
    add_output(parser, "output folder (default: tuning/<controller>_delay<d>)", type=Path)
    parser.add_argument("--force", action="store_true", help="write over an existing output folder")
    add_engine_arguments(parser)
    return parser


def _stderr(line: str) -> None:
    print(f"{PROG}: {line}", file=sys.stderr, flush=True)


def tune(args: argparse.Namespace, output: Path, engine: Engine, emit=_stderr) -> tuple[Path, dict]:
    """Search, write gains.yaml, run the held-out sweep for both sets, write the report; (report, best)."""
    import optuna
    # Trial results go to the output's tables; Tune's own CSV, JSON and TensorBoard loggers stay off.
    os.environ["TUNE_DISABLE_AUTO_CALLBACK_LOGGERS"] = "1"
    from ray import tune as ray_tune
    from ray.tune.search.optuna import OptunaSearch

    params = str(args.params.resolve())
    plant_file = str((args.plant_params or args.params).resolve())
    base, plant = load_parameters(params), load_parameters(plant_file)
    cases = [replace(c, plant_parameters_file=plant_file) for c in expand(tuning_spec(args.controller, args.delay, plant, args.seed), output)]
    setting = {"controller": args.controller, "delay": args.delay, "params": params, "cases": cases}
    space = {name: ray_tune.loguniform(low, high) for name, (low, high) in SPACES[args.controller].items()}
    search = OptunaSearch(metric="objective", mode="min", sampler=optuna.samplers.TPESampler(seed=args.seed),
                          points_to_evaluate=[shipped_point(args.controller, base)])
    emit(f"{args.trials} trials of {len(cases)} cases each on {engine.cpus} CPU(s)")
    tuner = ray_tune.Tuner(
        ray_tune.with_resources(trainable, {"cpu": 1}),
        param_space={**space, "setting": setting},
        tune_config=ray_tune.TuneConfig(search_alg=search, num_samples=args.trials, max_concurrent_trials=engine.cpus),
        run_config=ray_tune.RunConfig(storage_path=str((output / "trials").resolve()), name="search", verbose=0),
    )
    results = tuner.fit()
    trials = [trial_row(result) for result in results]
    write_rows(trials, output, "tuning")
    feasible = [t for t in trials if t["feasible"]]
    if not feasible:
        reasons = sorted({str(t["reason"]) for t in trials})
        raise HexapodError(f"no feasible gains in {len(trials)} trials; why: {'; '.join(reasons[:5])}")
    shipped = shipped_trial(trials, args.controller, base)
    best = min(feasible, key=lambda t: t["objective"])
    if shipped is not None and shipped["feasible"] and best["objective"] > (1.0 - MIN_IMPROVEMENT) * shipped["objective"]:
        best = shipped
        emit(f"no trial beats the shipped gains by {MIN_IMPROVEMENT:.0%}: they are kept")
    point = {name: best[name] for name in SPACES[args.controller]}
    section = gains_section(args.controller, point, base)
    lowest = lowest_stable_rate(base, linear_plant_models(cases), args.controller, args.delay)
    section["valid_rates"] = valid_rates(best["lowest_stable_rate"], base.controllers.rate)
    gains_file = write_overlay(output / "gains.yaml", overlay_document(params, args.controller, section, args.delay),
                               f"# {PROG}: {args.controller} gains for {plant_file} at {args.delay} period(s) of loop delay\n"
                               f"# (the best of {len(trials)} trials; report.md compares them with the shipped gains)\n")
    load_parameters(gains_file)  # the overlay must load as written
    emit(f"best of {len(feasible)} feasible trials: {point}; held-out sweep next")
    held_out = [replace(c, plant_parameters_file=plant_file)
                for c in expand(held_out_spec(args.controller, args.delay, plant, args.seed), output)]
    shipped_overlay = write_overlay(output / "shipped_compensated.yaml", overlay_document(
        params, args.controller, {}, args.delay), "# the shipped gains with the same compensated delay\n")
    labelled = ([replace(c, parameters_file=str(gains_file), label="tuned") for c in held_out]
                + [replace(c, parameters_file=str(shipped_overlay), label="shipped", index=c.index + len(held_out))
                   for c in held_out])
    rows = run_cases(labelled, engine, "held-out", emit)
    write_rows(rows, output, "held_out")
    report = write_report(output, args, trials, best, lowest, section, rows)
    return report, best


def write_report(output: Path, args, trials, best, shipped_lowest, section, rows) -> Path:
    document = Document(f"Gains for {args.controller} at {args.delay} period(s) of loop delay")
    document.paragraph(f"Parameters `{args.params}`, plant `{args.plant_params or args.params}`; {len(trials)} trials "
                       f"({sum(1 for t in trials if t['feasible'])} feasible), the first the shipped gains. Tuned gains: "
                       "`gains.yaml` (an overlay of the parameters). Trials: `tuning.parquet`; held-out rows: `held_out.parquet`.")
    shipped = shipped_trial(trials, args.controller, load_parameters(args.params))
    if best is shipped:
        document.paragraph(f"No trial beat the shipped gains' objective by {MIN_IMPROVEMENT:.0%}: `gains.yaml` holds the "
                           "shipped gains, with the valid_rates they have at this delay.")
    document.add(Table("The tuning sweep (payload 0, 2 kg x reflected inertia 0.8, 1.2 x the plant's, jitter 0.5 period, "
                       "sensor noise 1 um, 1.5 s of the joint-space trajectory): objective = mean of position RMS + 0.25 m/rad x orientation RMS.",
                       ["gains", "objective [m]", "feasible", "why not", "lowest stable rate [Hz]"],
                       [[label, t["objective"], str(t["feasible"]), t["reason"] or "-", t["lowest_stable_rate"]]
                        for label, t in (("shipped", shipped), ("tuned", best)) if t is not None]))
    document.paragraph("Tuned gains: " + ", ".join(f"`{k}` = {v}" for k, v in section.items()) + ". The shipped gains' "
                       f"linearised loop is stable from {shipped_lowest:.0f} Hz on the tuning plants at this delay.")
    header = ["gains", "cases", "stable", "position RMS mean [mm]", "p90 [mm]", "max [mm]", "orientation RMS mean [mrad]",
              "max [mrad]", "peak force [N]", "saturated max [s]"]
    document.add(Table("The held-out sweep (payload 0, 1 and 2 kg x 4 draws of reflected inertia and viscous friction 0.7-1.3 x the "
                       "plant's, jitter up to 0.5 period, sensor noise up to 2 um; 3 s of the joint-space trajectory), "
                       "both gain sets on the same cases.", header,
                       [_summary([r for r in rows if r["controller"] == label], label) for label in ("tuned", "shipped")]))
    markdown, _ = document.write(output)
    return markdown


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.trials < 1 or args.delay < 0:
        _stderr("error: --trials must be >= 1 and --delay >= 0")
        return 2
    output = args.output or Path("tuning") / f"{args.controller}_delay{args.delay}"
    try:
        prepare_output(output, args.force, PROG, TUNE_FILES)
        with Engine(args.address, args.workers) as engine:
            report, _ = tune(args, output, engine)
    except (HexapodError, OSError, ValueError) as error:
        _stderr("error: " + " ".join(str(error).split()))
        return 1
    print(f"gains: {output / 'gains.yaml'}; report: {report}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
