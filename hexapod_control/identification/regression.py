"""Robust least squares of the drive parameters, the friction model chosen on held-out data, intervals.

Unknowns per slider i: theta_i = (J_i, b_i, F_c,i) and, when the data support them, the lead
screw's terms (model/actuators.py): the Coulomb asymmetry A_i, the Stribeck level F_s,i - F_c,i
(at a speed v_st,i chosen from ``stribeck_speeds``) and the viscous ripple (b_c,i, b_s,i);
with ``--payload`` one mass shared by all sliders. Row (n, i), grid point n and slider i, reads

    y_ni = H F_ni - tau_rigid,ni = J_i a_ni + b_i v_ni + F_c,i c_ni [+ lead-screw columns] [+ m p_ni] + e_ni

(see samples.py). F is the joint states' effort (the force applied) when every joint state of
the run carries one, else the command.

Force-to-motion delay. Each candidate delay d (the effort read back a period late or on time; the
commands 0..``max_delay_steps`` periods late) is fitted with the richest friction model (every
lead-screw term), robustly, and the delay whose fit leaves the least robust residual variance is
kept. A wrong delay shifts the force by a period against the motion: the rigid bodies' and the
rotors' jerk times the period, which no friction term (they see speed and position) can absorb.
Fitting the richest model takes the friction law's error out of the comparison, which is what let
a wrong delay win with the symmetric model alone; the report gives the runner-up's residual over
the kept one's (the margin).

Robust regression. Iteratively reweighted least squares with Huber's weights: a residual beyond
``robust_threshold`` robust standard deviations (1.4826 x MAD, per slider) weighs
threshold sigma / |r| instead of 1. No row is ever dropped: a collision or stick-slip weighs
less, and a friction law that does not fit all rows cannot remove them all.

Model choice. A ``validation_fraction`` of each run, in blocks of ``VALIDATION_BLOCK`` seconds
spread over it, is held out: every friction model
(the package's symmetric one, and with any of asymmetry, Stribeck hump, ripple) is fitted on the
rest and predicts the held-out rows. The simplest model whose held-out mean Huber loss is within
``model_improvement`` of the best is chosen, per slider; the report gives every model's held-out
residual. The values are then fitted on all rows with the chosen model.

Intervals that separate noise from model error. The residual's mean in bins of the signed speed
(``SPEED_BINS``) is the model error (what the friction law misses at that speed); what is left is
noise. The intervals use the noise, with its variance inflation kappa from its autocorrelation
(the filter makes neighbouring rows alike), so a friction law that is not quite right does not
make the inertia "not identifiable"; the model error is reported per slider beside them.

A parameter is reported only if its slider has ``min_samples`` rows and its interval half-width is
within ``resolution``; else it is "not identifiable", with the reason (the rows left out and why,
or the interval that is too wide: poor excitation). A value more negative than its resolution is
inconsistent with the model and not reported either; a smaller negative one is zero within the
resolution, and the overlay writes it as 0 (the payload as the platform mass it gives).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import combinations

import numpy as np
from scipy.ndimage import minimum_filter1d
from scipy.stats import norm

from scipy.optimize import minimize_scalar

from hexapod_control.identification.samples import RunSamples, aligned_forces, stribeck_column
from hexapod_control.model.parameters import HexapodParameters

DRIVE_PARAMETERS = ("reflected_inertia", "viscous_friction", "coulomb_friction")
# The lead screw's terms by group: a model is the symmetric one plus any set of groups.
GROUPS = {
    "asymmetry": ("coulomb_asymmetry",),
    "stribeck": ("stribeck_friction",),
    "ripple": ("viscous_ripple_cos", "viscous_ripple_sin"),
}
LEAD_SCREW_PARAMETERS = tuple(name for names in GROUPS.values() for name in names)
PAYLOAD = "payload_mass"
UNITS = {
    "reflected_inertia": "kg", "viscous_friction": "N*s/m", "coulomb_friction": "N", "coulomb_asymmetry": "N",
    "stribeck_friction": "N", "viscous_ripple_cos": "N*s/m", "viscous_ripple_sin": "N*s/m", PAYLOAD: "kg",
}
SYMMETRIC = "symmetric"
_MAD_TO_SIGMA = 1.4826  # sigma / median absolute deviation of a normal distribution
# Eigenvalues of the scaled normal matrix below this fraction of the largest are left out of the
# solution (those directions get the huge variance 1 / lambda, so their parameters are not reported).
_RELATIVE_EIGENVALUE_FLOOR = 1e-12
_AUTOCORRELATION_WINDOWS = 4  # lags summed for kappa: up to this many filter windows
SPEED_BINS = 24  # equally populated bins of the signed speed in which the residual's mean is model error
_WEIGHT_CHANGE = 1e-3  # the reweighting has converged when no Huber weight moves by more
_STRIBECK_SPEED_TOLERANCE = 0.01  # of log(v_st): the refined Stribeck speed to 1 %
VALIDATION_BLOCK = 1.0  # [s] blocks of held-out rows: many filter windows, a fraction of an excitation period


def validation_every(settings) -> int:
    """k: every k-th block is held out (1 / validation_fraction, at least 2 so that some rows are fitted)."""
    return max(int(round(1.0 / settings.validation_fraction)), 2)


def model_name(groups: tuple[str, ...]) -> str:
    return " + ".join(groups) if groups else SYMMETRIC


@dataclass
class Estimate:
    name: str  # one of DRIVE_PARAMETERS, LEAD_SCREW_PARAMETERS or PAYLOAD
    slider: int | None  # None for the payload
    value: float  # least-squares value (also when not identifiable, for the report's record)
    half_width: float  # of the confidence interval (inf without rows)
    identified: bool
    reason: str = ""  # why not identifiable ("" when identified)

    @property
    def unit(self) -> str:
        return UNITS[self.name]


@dataclass
class RowCounts:
    """Per slider, how many grid points were usable as rows and why the others were left out."""

    used: np.ndarray  # (6,)
    invalid: np.ndarray  # filter window incomplete, gap, FK failure, no command yet
    slow: np.ndarray  # slower than min_speed somewhere in the filter window (reversals, rest)
    saturated: np.ndarray
    downweighted: np.ndarray  # rows the robust fit weighed less than 1 (beyond robust_threshold sigma)


@dataclass
class ModelChoice:
    """Per slider, the friction models tried, their held-out residual, and the one chosen."""

    chosen: list[tuple[str, ...]]  # the groups of each slider's model
    stribeck_speed: np.ndarray  # (6,) v_st of the chosen model (0 without the hump) [m/s]
    held_out_rms: list[dict[str, float]]  # per slider: model name -> held-out RMS residual [N]
    held_out_rows: np.ndarray  # (6,)


@dataclass
class RunFit:
    label: str
    delay: int  # force-to-motion delay kept [periods] (-1: the effort read back over the period before)
    delay_margin: float  # residual variance at the runner-up delay over that at the one kept
    source: str  # "effort" (joint states) or "commands"
    t: np.ndarray  # (N,) grid times [s]
    rows: np.ndarray  # (N, 6) rows of the fit
    held_out: np.ndarray  # (N, 6) rows held out of the model choice
    velocity: np.ndarray  # (N, 6) H q_d [m/s]
    measured: np.ndarray  # (N, 6) H F aligned [N]
    before: np.ndarray  # (N, 6) predicted with the base file's drives [N]
    after: np.ndarray  # (N, 6) predicted with the identified values [N]
    validation: np.ndarray  # (N, 6) predicted by the chosen model fitted without the held-out rows [N]
    effort_delay: int | None = None  # measured periods from a command to the effort showing it
    effort_mismatch: float = float("nan")  # RMS effort - delayed command [N]


@dataclass
class Identification:
    estimates: list[Estimate]
    runs: list[RunFit]
    counts: RowCounts
    choice: ModelChoice
    sigma: np.ndarray  # (6,) noise standard deviation per slider (the residual less its model error) [N]
    model_error: np.ndarray  # (6,) RMS of the residual's mean by speed [N]
    inflation: np.ndarray  # (6,) kappa of the noise
    confidence_level: float
    rms_before: np.ndarray  # (6,) RMS force residual over the rows of the fit, base file's drives [N]
    rms_after: np.ndarray  # (6,) the same with the identified values [N]
    notes: list[str] = field(default_factory=list)

    def estimate(self, name: str, slider: int | None = None) -> Estimate:
        return next(e for e in self.estimates if e.name == name and e.slider == slider)

    @property
    def any_identified(self) -> bool:
        return any(e.identified for e in self.estimates)


# ------------------------------------------------------------------------------------------ columns
class _Design:
    """The candidate rows, targets and every column of one run at one delay and force source."""

    def __init__(self, samples: RunSamples, delay: int, applied: bool, settings):
        self.samples, self.delay, self.applied = samples, delay, applied
        forces, usable, saturated = aligned_forces(samples, delay, applied)
        self.measured = forces
        target = forces - samples.rigid  # y
        # Moving through the whole filter window: a reversal's friction step, smeared over the window,
        # is where the friction law and its timing (the plant's step, the drive's) are least certain.
        moving = minimum_filter1d(np.abs(samples.velocity), size=samples.window, axis=0) >= settings.min_speed
        base = usable[:, None] & np.ones((1, 6), dtype=bool)
        self.invalid = ~base
        self.slow = base & ~moving
        self.saturated = base & moving & saturated
        self.candidates = base & moving & ~saturated
        self.target = np.where(self.candidates, target, 0.0)  # NaN-free where unused
        self.payload = None if samples.payload is None else np.nan_to_num(samples.payload)  # 0 where unused
        # Rows from here on are held out of the model choice (and predicted by it).
        # Every k-th block of VALIDATION_BLOCK seconds (k = 1 / validation_fraction, the last of each
        # k) is held out: spread over the run, it sees slow and fast phases alike.
        every = validation_every(settings)
        block = np.floor((samples.t - samples.t[0]) / VALIDATION_BLOCK).astype(int)
        self.held_out = block % every == every - 1

    def columns(self, groups: tuple[str, ...], stribeck: float, slider: int) -> np.ndarray:
        """(N, k) columns of ``slider`` for the symmetric model plus ``groups`` (``stribeck``: v_st [m/s])."""
        s = self.samples
        columns = [s.acceleration[:, slider], s.velocity[:, slider], s.coulomb[:, slider]]
        if "asymmetry" in groups:
            columns.append(s.asymmetry[:, slider])
        if "stribeck" in groups:
            columns.append(stribeck_column(s, stribeck)[:, slider])
        if "ripple" in groups:
            columns += [s.ripple[0, :, slider], s.ripple[1, :, slider]]
        return np.nan_to_num(np.column_stack(columns))


# ------------------------------------------------------------------------------------------ solving
def _solve(gram: np.ndarray, rhs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(theta, covariance) of gram theta = rhs, columns scaled to unit diagonal, by eigenvalues."""
    scale = np.sqrt(np.diag(gram))
    scale[scale == 0.0] = 1.0
    scaled = gram / np.outer(scale, scale)
    values, vectors = np.linalg.eigh(scaled)
    floor = _RELATIVE_EIGENVALUE_FLOOR * max(float(values[-1]), 0.0)
    kept = values > floor
    projected = vectors.T @ (rhs / scale)
    theta = vectors[:, kept] @ (projected[kept] / values[kept]) / scale
    with np.errstate(over="ignore"):
        inverse_values = 1.0 / np.maximum(values, np.finfo(float).tiny)
        covariance = (vectors * inverse_values) @ vectors.T / np.outer(scale, scale)
    return theta, covariance


def _robust_scale(residual: np.ndarray) -> float:
    if residual.size == 0:
        return 0.0
    return _MAD_TO_SIGMA * float(np.median(np.abs(residual - np.median(residual))))


def _huber_weights(residual: np.ndarray, sigma: float, threshold: float) -> np.ndarray:
    if not sigma > 0.0:
        return np.ones_like(residual)
    magnitude = np.abs(residual)
    return np.where(magnitude <= threshold * sigma, 1.0, threshold * sigma / np.maximum(magnitude, np.finfo(float).tiny))


def _huber_fit(x: np.ndarray, y: np.ndarray, threshold: float, iterations: int):
    """(theta, covariance of the weighted normal equations, weights, sigma) of a Huber IRLS fit of y on x."""
    weights = np.ones(y.size)
    theta, covariance, sigma = np.zeros(x.shape[1]), np.full((x.shape[1], x.shape[1]), np.inf), 0.0
    if y.size == 0:
        return theta, covariance, weights, sigma
    for _ in range(iterations):
        weighted = x * weights[:, None]
        theta, covariance = _solve(weighted.T @ x, weighted.T @ y)
        residual = y - x @ theta
        sigma = _robust_scale(residual)
        updated = _huber_weights(residual, sigma, threshold)
        converged = np.max(np.abs(updated - weights)) <= _WEIGHT_CHANGE
        weights = updated
        if converged:
            break
    return theta, covariance, weights, sigma


def _huber_loss(residual: np.ndarray, sigma: float, threshold: float) -> float:
    """Mean Huber loss (in N^2: a square below threshold sigma, linear beyond)."""
    if residual.size == 0:
        return np.inf
    k = threshold * sigma if sigma > 0.0 else np.inf
    magnitude = np.abs(residual)
    return float(np.mean(np.where(magnitude <= k, magnitude**2, 2.0 * k * magnitude - k * k)))


# ------------------------------------------------------------------------------------------ the delay
def _delay_score(design: _Design, settings) -> float:
    """Sum over the sliders of the robust residual variance of the richest model's Huber fit [N^2]."""
    richest = tuple(GROUPS)
    middle = settings.stribeck_speeds[len(settings.stribeck_speeds) // 2]
    score, rows_seen = 0.0, False
    for i in range(6):
        rows = design.candidates[:, i]
        if rows.sum() < settings.min_samples:
            continue
        x = design.columns(richest, middle, i)[rows]
        if design.payload is not None:
            x = np.column_stack([x, design.payload[rows, i]])
        _, _, _, sigma = _huber_fit(x, design.target[rows, i], settings.robust_threshold, settings.robust_iterations)
        score += sigma**2
        rows_seen = True
    return score if rows_seen else np.inf


def _choose_delay(samples: RunSamples, parameters: HexapodParameters) -> tuple[_Design, float]:
    """The design whose richest-model fit leaves the least robust residual, and the margin (module doc).

    The margin is the runner-up's score over the chosen one's (inf with a single candidate).
    """
    settings = parameters.identification
    applied = samples.applied is not None
    delays = (-1, 0) if applied else range(settings.max_delay_steps + 1)
    scored = []
    for delay in delays:
        design = _Design(samples, delay, applied, settings)
        scored.append((_delay_score(design, settings), delay, design))
    scored.sort(key=lambda item: item[:2])
    margin = scored[1][0] / scored[0][0] if len(scored) > 1 and scored[0][0] > 0.0 else np.inf
    return scored[0][2], margin


# ------------------------------------------------------------------------------------------ model choice
def _models() -> list[tuple[str, ...]]:
    """Every set of lead-screw groups, the simplest first."""
    names = tuple(GROUPS)
    return [groups for size in range(len(names) + 1) for groups in combinations(names, size)]


def _slider_rows(designs: list[_Design], i: int, part: str):
    """Row masks of slider i per run: 'fit' (not held out), 'held_out' or 'all'."""
    pieces = []
    for d in designs:
        rows = d.candidates[:, i].copy()
        if part == "fit":
            rows &= ~d.held_out
        elif part == "held_out":
            rows &= d.held_out
        pieces.append(rows)
    return pieces


def _stack(designs, masks, i, groups, stribeck, with_payload):
    x = [d.columns(groups, stribeck, i)[m] for d, m in zip(designs, masks)]
    if with_payload:
        x = [np.column_stack([c, d.payload[m, i]]) for c, d, m in zip(x, designs, masks)]
    y = [d.target[m, i] for d, m in zip(designs, masks)]
    return np.concatenate(x), np.concatenate(y)


def _choose_models(designs: list[_Design], parameters: HexapodParameters, with_payload: bool) -> ModelChoice:
    settings = parameters.identification
    chosen, speeds, held_out_rms, held_rows = [], np.zeros(6), [], np.zeros(6, dtype=int)
    for i in range(6):
        fit_masks, held_masks = _slider_rows(designs, i, "fit"), _slider_rows(designs, i, "held_out")
        held_rows[i] = sum(int(m.sum()) for m in held_masks)
        losses, rms, speed_of = {}, {}, {}
        for groups in _models():
            tried = settings.stribeck_speeds if "stribeck" in groups else (0.0,)
            best = None
            for speed in tried:
                x, y = _stack(designs, fit_masks, i, groups, speed, with_payload)
                if y.size < settings.min_samples or held_rows[i] == 0:
                    continue
                theta, _, _, sigma = _huber_fit(x, y, settings.robust_threshold, settings.robust_iterations)
                xh, yh = _stack(designs, held_masks, i, groups, speed, with_payload)
                residual = yh - xh @ theta
                loss = _huber_loss(residual, sigma, settings.robust_threshold)
                if best is None or loss < best[0]:
                    best = (loss, float(np.sqrt(np.mean(residual**2))), speed)
            if best is not None:
                losses[groups], rms[model_name(groups)], speed_of[groups] = best
        if not losses:
            chosen.append(())
            held_out_rms.append({})
            continue
        floor = min(losses.values()) * (1.0 + settings.model_improvement)
        pick = next(groups for groups in _models() if groups in losses and losses[groups] <= floor)
        chosen.append(pick)
        if "stribeck" in pick:
            speeds[i] = _refined_stribeck_speed(designs, i, pick, speed_of[pick], settings, with_payload)
        held_out_rms.append(rms)
    return ModelChoice(chosen, speeds, held_out_rms, held_rows)


def _refined_stribeck_speed(designs, i, groups, start: float, settings, with_payload: bool) -> float:
    """v_st between the grid's neighbours of ``start`` that best fits all rows of slider i (robust loss)."""
    grid = settings.stribeck_speeds
    k = sorted(grid).index(start)
    low, high = sorted(grid)[max(k - 1, 0)], sorted(grid)[min(k + 1, len(grid) - 1)]
    if low == high:
        return start
    masks = _slider_rows(designs, i, "all")

    def loss(log_speed: float) -> float:
        x, y = _stack(designs, masks, i, groups, float(np.exp(log_speed)), with_payload)
        theta, _, _, sigma = _huber_fit(x, y, settings.robust_threshold, settings.robust_iterations)
        return _huber_loss(y - x @ theta, sigma, settings.robust_threshold)

    found = minimize_scalar(loss, bounds=(np.log(low), np.log(high)), method="bounded",
                            options={"xatol": _STRIBECK_SPEED_TOLERANCE})
    return float(np.exp(found.x))


# ------------------------------------------------------------------------------------------ noise and model error
def _lagged_products(x: np.ndarray, max_lag: int) -> np.ndarray:
    """sum_t x_t x_t+k for k = 0..max_lag, by FFT (one pass for every lag)."""
    size = 1 << (2 * x.size - 1).bit_length()
    spectrum = np.fft.rfft(x, size)
    return np.fft.irfft(spectrum * np.conj(spectrum), size)[: max_lag + 1]


def _inflation(series: list[tuple[np.ndarray, np.ndarray]], max_lag: int) -> float:
    """kappa = 1 + 2 sum_k rho_k over the initial positive run of the autocorrelation of (values, mask) series."""
    products, pairs = np.zeros(max_lag + 1), np.zeros(max_lag + 1)
    for values, mask in series:
        m = mask.astype(float)
        lags = min(max_lag, m.size - 1)
        products[: lags + 1] += _lagged_products(values * m, lags)
        pairs[: lags + 1] += np.round(_lagged_products(m, lags))
    if not (pairs[0] > 0 and products[0] > 0.0):
        return 1.0
    variance = products[0] / pairs[0]
    total = 0.0
    for lag in range(1, max_lag + 1):
        if not pairs[lag]:
            break
        rho = products[lag] / pairs[lag] / variance
        if rho <= 0.0:
            break
        total += rho
    return 1.0 + 2.0 * total


def _speed_binned_mean(speed: np.ndarray, residual: np.ndarray) -> np.ndarray:
    """The residual's mean in SPEED_BINS equally populated bins of the signed speed, at each row."""
    if residual.size < SPEED_BINS:
        return np.zeros_like(residual)
    edges = np.quantile(speed, np.linspace(0.0, 1.0, SPEED_BINS + 1)[1:-1])
    bins = np.searchsorted(edges, speed)
    means = np.bincount(bins, residual, SPEED_BINS) / np.maximum(np.bincount(bins, minlength=SPEED_BINS), 1)
    return means[bins]


# ------------------------------------------------------------------------------------------ the fit
def identify_samples(runs: list[RunSamples], parameters: HexapodParameters, with_payload: bool) -> Identification:
    """Fit the drive parameters (and the payload) to the prepared runs; see the module doc."""
    settings = parameters.identification
    chosen_delays = [_choose_delay(samples, parameters) for samples in runs]
    designs = [design for design, _ in chosen_delays]
    choice = _choose_models(designs, parameters, with_payload)
    masks = [[d.candidates[:, i] for d in designs] for i in range(6)]
    # Per slider: its columns on its rows (all runs stacked), Huber-fitted alone first.
    blocks, stribeck_index = [], list(choice.stribeck_speed)
    for i in range(6):
        x, y = _stack(designs, masks[i], i, choice.chosen[i], stribeck_index[i], False)
        payload = np.concatenate([d.payload[m, i] for d, m in zip(designs, masks[i])]) if with_payload else None
        blocks.append((x, y, payload))
    theta, covariance, weights, sigma, model_error, kappa = _joint_fit(
        blocks, [[(d.samples.velocity[:, i], m) for d, m in zip(designs, masks[i])] for i in range(6)],
        settings, with_payload, max(s.window for s in runs))

    used = np.array([b[1].size for b in blocks])
    counts = RowCounts(
        used=used,
        invalid=np.sum([d.invalid.sum(axis=0) for d in designs], axis=0),
        slow=np.sum([d.slow.sum(axis=0) for d in designs], axis=0),
        saturated=np.sum([d.saturated.sum(axis=0) for d in designs], axis=0),
        downweighted=np.array([int(np.sum(w < 1.0)) for w in weights]),
    )
    quantile = float(norm.ppf(0.5 + 0.5 * settings.confidence_level))
    half_widths = quantile * np.sqrt(np.maximum(np.diag(covariance), 0.0))
    names = [(*DRIVE_PARAMETERS, *(n for g in choice.chosen[i] for n in GROUPS[g])) for i in range(6)]
    estimates = _classify(theta, half_widths, names, counts, parameters, with_payload)

    fits, before_sq, after_sq = [], np.zeros(6), np.zeros(6)
    validation_theta = _validation_fits(designs, choice, stribeck_index, settings, with_payload)
    base = _base_theta(parameters, choice, with_payload)
    for (design, margin), samples in zip(chosen_delays, runs):
        rows = design.candidates
        before, after, validation = (samples.rigid + _predict(design, t, choice, stribeck_index, with_payload)
                                     for t in (base, theta, validation_theta))
        held = rows & design.held_out[:, None]
        fits.append(RunFit(samples.label, design.delay, margin, "effort" if design.applied else "commands",
                           samples.t, rows, held, samples.velocity, design.measured, before, after, validation,
                           samples.effort_delay, samples.effort_mismatch))
        before_sq += np.sum(np.where(rows, design.measured - before, 0.0) ** 2, axis=0)
        after_sq += np.sum(np.where(rows, design.measured - after, 0.0) ** 2, axis=0)
    total = np.maximum(used, 1)
    return Identification(
        estimates=estimates, runs=fits, counts=counts, choice=choice, sigma=sigma, model_error=model_error,
        inflation=kappa, confidence_level=settings.confidence_level,
        rms_before=np.sqrt(before_sq / total), rms_after=np.sqrt(after_sq / total),
    )


def _joint_fit(blocks, speeds, settings, with_payload: bool, window: int):
    """Huber fit of all sliders (coupled by the payload), intervals from the noise: see the module doc.

    Returns theta (stacked per slider, the payload last), its covariance, each slider's Huber
    weights, noise sigma, model error and kappa.
    """
    sizes = [b[0].shape[1] for b in blocks]
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    size = int(offsets[-1]) + (1 if with_payload else 0)
    weights = [np.ones(b[1].size) for b in blocks]
    scale = np.ones(6)  # each slider's rows weigh 1 / sigma_i^2 (the sliders' noise differs)
    theta = covariance = None
    residuals = [b[1] for b in blocks]
    for _ in range(settings.robust_iterations):
        theta, covariance = _solve(*_normal_equations(blocks, weights, scale, offsets, size, with_payload))
        residuals = [_block_residual(b, theta, offsets, i, with_payload) for i, b in enumerate(blocks)]
        sigmas = np.array([_robust_scale(r) for r in residuals])
        updated = [_huber_weights(r, s, settings.robust_threshold) for r, s in zip(residuals, sigmas)]
        scale = np.divide(1.0, sigmas**2, out=np.zeros(6), where=sigmas > 0.0)
        change = max((float(np.max(np.abs(u - w))) for u, w in zip(updated, weights) if u.size), default=0.0)
        weights = updated
        if change <= _WEIGHT_CHANGE:
            break
    # Noise = residual less its mean by speed; its variance and kappa set the intervals.
    sigma, model_error, kappa = np.zeros(6), np.zeros(6), np.ones(6)
    max_lag = _AUTOCORRELATION_WINDOWS * window
    for i, (residual, runs) in enumerate(zip(residuals, speeds)):
        if residual.size == 0:
            continue
        speed = np.concatenate([v[m] for v, m in runs])
        systematic = _speed_binned_mean(speed, residual)
        noise = residual - systematic
        model_error[i] = float(np.sqrt(np.average(systematic**2, weights=weights[i])))
        dof = max(residual.size - sizes[i], 1)
        sigma[i] = float(np.sqrt(np.sum(weights[i] * noise**2) / dof))
        series, start = [], 0
        for _, mask in runs:
            full = np.zeros(mask.size)
            count = int(mask.sum())
            full[mask] = noise[start : start + count]
            series.append((full, mask))
            start += count
        kappa[i] = _inflation(series, max_lag)
    final_scale = np.divide(1.0, sigma**2 * kappa, out=np.zeros(6), where=sigma > 0.0)
    theta, covariance = _solve(*_normal_equations(blocks, weights, final_scale, offsets, size, with_payload))
    return theta, covariance, weights, sigma, model_error, kappa


def _normal_equations(blocks, weights, scale, offsets, size, with_payload):
    gram, rhs = np.zeros((size, size)), np.zeros(size)
    for i, ((x, y, payload), w) in enumerate(zip(blocks, weights)):
        if y.size == 0:
            continue
        wi = w * scale[i]
        block = slice(offsets[i], offsets[i + 1])
        weighted = x * wi[:, None]
        gram[block, block] += weighted.T @ x
        rhs[block] += weighted.T @ y
        if with_payload:
            cross = weighted.T @ payload
            gram[block, -1] += cross
            gram[-1, block] += cross
            gram[-1, -1] += float(np.sum(wi * payload**2))
            rhs[-1] += float(np.sum(wi * payload * y))
    return gram, rhs


def _block_residual(block, theta, offsets, i, with_payload):
    x, y, payload = block
    residual = y - x @ theta[offsets[i] : offsets[i + 1]]
    return residual - theta[-1] * payload if with_payload else residual


def _validation_fits(designs, choice, stribeck_index, settings, with_payload):
    """theta of the chosen models fitted without the held-out rows (per slider; the payload per slider too)."""
    pieces = []
    for i in range(6):
        masks = _slider_rows(designs, i, "fit")
        x, y = _stack(designs, masks, i, choice.chosen[i], stribeck_index[i], with_payload)
        theta, _, _, _ = _huber_fit(x, y, settings.robust_threshold, settings.robust_iterations)
        pieces.append(theta)
    return pieces


def _base_theta(parameters: HexapodParameters, choice: ModelChoice, with_payload: bool):
    """The base file's drives as per-slider parameter vectors of the chosen models (no hump, no ripple)."""
    drives = parameters.actuators
    pieces = []
    for i in range(6):
        values = [drives.reflected_inertia[i], drives.viscous_friction[i], drives.coulomb_friction[i]]
        for group in choice.chosen[i]:
            values += [drives.coulomb_asymmetry[i]] if group == "asymmetry" else [0.0] * len(GROUPS[group])
        pieces.append(np.array(values + ([0.0] if with_payload else [])))
    return pieces


def _predict(design: _Design, theta, choice: ModelChoice, stribeck_index, with_payload) -> np.ndarray:
    """Drive (and payload) forces (N, 6) of theta: stacked (from the joint fit) or per slider."""
    forces = np.zeros_like(design.target)
    offset = 0
    for i in range(6):
        x = design.columns(choice.chosen[i], stribeck_index[i], i)
        if isinstance(theta, list):
            coefficients = theta[i]
            forces[:, i] = x @ coefficients[: x.shape[1]]
            if with_payload:
                forces[:, i] += coefficients[-1] * design.payload[:, i]
        else:
            forces[:, i] = x @ theta[offset : offset + x.shape[1]]
            if with_payload:
                forces[:, i] += theta[-1] * design.payload[:, i]
            offset += x.shape[1]
    return forces


def _classify(theta, half_widths, names, counts: RowCounts, parameters: HexapodParameters,
              with_payload: bool) -> list[Estimate]:
    settings = parameters.identification
    joints = parameters.ros.joint_names
    estimates = []

    def judged(name, slider, value, half_width, rows, saturated, left_out):
        resolution = getattr(settings.resolution, name)
        unit = UNITS[name]
        signed = name in ("coulomb_asymmetry", "viscous_ripple_cos", "viscous_ripple_sin")
        if rows < settings.min_samples:
            # Saturation is the cause when it took at least as many moving rows as it left.
            cause = "saturation: too few unsaturated samples" if saturated and saturated >= rows else "too few samples"
            reason = f"{cause}: {rows} rows (min_samples {settings.min_samples}); left out: {left_out}"
        elif not half_width <= resolution:
            reason = (
                f"poor excitation: the {settings.confidence_level:.0%} interval +-{half_width:.3g} {unit} is wider "
                f"than the resolution {resolution:g} {unit}"
            )
        elif value < -resolution and not signed:
            reason = f"inconsistent: {value:.4g} +- {half_width:.3g} {unit} is negative (the model does not fit these data)"
        else:
            return Estimate(name, slider, float(value), float(half_width), True)
        return Estimate(name, slider, float(value), float(half_width), False, reason)

    def left_out(slow, saturated, invalid):
        return f"{slow} slower than min_speed, {saturated} saturated, {invalid} without a full window or command"

    k = 0
    for i in range(6):
        why = left_out(counts.slow[i], counts.saturated[i], counts.invalid[i]) + f" ({joints[i]})"
        for name in names[i]:
            estimates.append(judged(name, i, theta[k], half_widths[k], int(counts.used[i]), int(counts.saturated[i]), why))
            k += 1
    if with_payload:
        totals = [int(np.sum(c)) for c in (counts.slow, counts.saturated, counts.invalid)]
        estimates.append(judged(PAYLOAD, None, theta[-1], half_widths[-1], int(counts.used.sum()), totals[1],
                                left_out(*totals) + " (all sliders)"))
    return estimates
