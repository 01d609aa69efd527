"""Least squares of the drive parameters on the rows of one or more runs, with confidence intervals.

Unknowns theta = (J_0, b_0, F_c,0, ..., J_5, b_5, F_c,5[, m_payload]); row (n, i), grid point n and
slider i, reads

    y_ni = H F_ni - tau_rigid,ni = J_i a_ni + b_i v_ni + F_c,i c_ni [+ m_payload p_ni] + e_ni

(see samples.py). Without the payload the sliders decouple into six 3-parameter fits; with it they
share one column. The fit works on the normal equations, accumulated per slider, with the columns
scaled to unit diagonal. The force-to-motion delay (loop delay plus sensor delay) is the one, of
0..``max_delay_steps`` periods, whose fit leaves the least robust residual.

Rows used: valid grid points whose slider moves at least ``min_speed`` throughout the filter window
and whose command was not saturated within it. Then, per round (``outlier_iterations``): fit, robust standard
deviation of each slider's residual (1.4826 x median absolute deviation), rows beyond
``outlier_threshold`` of them dropped. The final fit weights each slider by 1 / (sigma_i^2 kappa_i):
kappa_i = 1 + 2 sum rho_k is the variance inflation of the residual's autocorrelation (the filter
makes neighbouring rows alike; summed over the positive lags of its initial run), so the intervals
count effective, not nominal, samples. Intervals: normal quantile of ``confidence_level`` times the
standard error.

A parameter is reported only if its slider has ``min_samples`` rows and its interval half-width is
within ``resolution``; else it is "not identifiable", with the reason (the rows left out and why,
or the interval that is too wide: poor excitation). A value more negative than its resolution is
inconsistent with the model and not reported either; a smaller negative one is zero within the
resolution (the intervals are statistical: the filter's own bias, a few tenths of a percent, is
not in them), and the overlay writes it as 0 (the payload as the platform mass it gives).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy.ndimage import minimum_filter1d
from scipy.stats import norm

from hexapod_control.identification.samples import RunSamples, aligned_forces
from hexapod_control.model.parameters import HexapodParameters

DRIVE_PARAMETERS = ("reflected_inertia", "viscous_friction", "coulomb_friction")
PAYLOAD = "payload_mass"
UNITS = {"reflected_inertia": "kg", "viscous_friction": "N*s/m", "coulomb_friction": "N", PAYLOAD: "kg"}
_PER_SLIDER = len(DRIVE_PARAMETERS)
_MAD_TO_SIGMA = 1.4826  # sigma / median absolute deviation of a normal distribution
# Eigenvalues of the scaled normal matrix below this fraction of the largest are left out of the
# solution (those directions get the huge variance 1 / lambda, so their parameters are not reported).
_RELATIVE_EIGENVALUE_FLOOR = 1e-12
_AUTOCORRELATION_WINDOWS = 4  # lags summed for kappa: up to this many filter windows


@dataclass
class Estimate:
    name: str  # one of DRIVE_PARAMETERS or PAYLOAD
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
    slow: np.ndarray  # slower than min_speed
    saturated: np.ndarray
    outliers: np.ndarray


@dataclass
class RunFit:
    label: str
    delay: int  # chosen force-to-motion delay [periods]
    t: np.ndarray  # (N,) grid times [s]
    rows: np.ndarray  # (N, 6) rows used in the final fit
    candidates: np.ndarray  # (N, 6) rows before outlier rejection
    measured: np.ndarray  # (N, 6) H F aligned [N]
    before: np.ndarray  # (N, 6) predicted with the base file's drives [N]
    after: np.ndarray  # (N, 6) predicted with the identified values [N]


@dataclass
class Identification:
    estimates: list[Estimate]
    runs: list[RunFit]
    counts: RowCounts
    sigma: np.ndarray  # (6,) residual standard deviation per slider [N]
    inflation: np.ndarray  # (6,) kappa
    confidence_level: float
    rms_before: np.ndarray  # (6,) RMS force residual over the rows of the fit, base file's drives [N]
    rms_after: np.ndarray  # (6,) the same with the identified values [N]
    notes: list[str] = field(default_factory=list)

    def estimate(self, name: str, slider: int | None = None) -> Estimate:
        return next(e for e in self.estimates if e.name == name and e.slider == slider)

    @property
    def any_identified(self) -> bool:
        return any(e.identified for e in self.estimates)


class _Design:
    """The columns and targets of one run at one delay."""

    def __init__(self, samples: RunSamples, delay: int, min_speed: float):
        self.samples, self.delay = samples, delay
        forces, usable, saturated = aligned_forces(samples, delay)
        self.measured = forces
        self.target = forces - samples.rigid  # y
        columns = [samples.acceleration, samples.velocity, samples.coulomb]
        self.columns = np.stack(columns, axis=2)  # (N, 6, 3)
        self.payload = None if samples.payload is None else np.nan_to_num(samples.payload)  # 0 where unused
        # Moving through the whole filter window: a reversal's friction step, smeared over the window,
        # is where the friction law and its timing are least certain.
        moving = minimum_filter1d(np.abs(samples.velocity), size=samples.window, axis=0) >= min_speed
        base = usable[:, None] & np.ones((1, 6), dtype=bool)
        self.invalid = ~base
        self.slow = base & ~moving
        self.saturated = base & moving & saturated
        self.candidates = base & moving & ~saturated
        self.target = np.where(self.candidates, self.target, 0.0)  # NaN-free where unused

    def predicted(self, theta: np.ndarray) -> np.ndarray:
        """The drive (and payload) forces for theta (N, 6)."""
        drives = theta[: 6 * _PER_SLIDER].reshape(6, _PER_SLIDER)
        forces = np.einsum("nij,ij->ni", self.columns, drives)
        if self.payload is not None and theta.size > 6 * _PER_SLIDER:
            forces = forces + theta[-1] * self.payload
        return forces


def _normal_equations(designs: list[_Design], weights: list[np.ndarray], with_payload: bool):
    """Gram matrix and right-hand side of the weighted least squares, all sliders at once."""
    size = 6 * _PER_SLIDER + (1 if with_payload else 0)
    gram, rhs = np.zeros((size, size)), np.zeros(size)
    for design, weight in zip(designs, weights):
        weighted = design.columns * weight[:, :, None]  # (N, 6, 3)
        blocks = np.einsum("nij,nik->ijk", weighted, design.columns, optimize=True)  # (6, 3, 3)
        for i in range(6):
            block = slice(_PER_SLIDER * i, _PER_SLIDER * (i + 1))
            gram[block, block] += blocks[i]
        rhs[: 6 * _PER_SLIDER] += np.einsum("nij,ni->ij", weighted, design.target, optimize=True).ravel()
        if with_payload:
            cross = np.einsum("nij,ni->ij", weighted, design.payload, optimize=True).ravel()
            gram[: 6 * _PER_SLIDER, -1] += cross
            gram[-1, : 6 * _PER_SLIDER] += cross
            gram[-1, -1] += float(np.sum(weight * design.payload**2))
            rhs[-1] += float(np.sum(weight * design.payload * design.target))
    return gram, rhs


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
    inverse_values = 1.0 / np.maximum(values, np.finfo(float).tiny)
    covariance = (vectors * inverse_values) @ vectors.T / np.outer(scale, scale)
    return theta, covariance


def _residuals(designs, theta):
    return [np.where(d.candidates, d.target - d.predicted(theta), 0.0) for d in designs]


def _robust_sigma(residuals, rows) -> np.ndarray:
    sigma = np.zeros(6)
    for i in range(6):
        values = np.concatenate([r[m[:, i], i] for r, m in zip(residuals, rows)])
        if values.size:
            sigma[i] = _MAD_TO_SIGMA * float(np.median(np.abs(values - np.median(values))))
    return sigma


def _lagged_products(x: np.ndarray, max_lag: int) -> np.ndarray:
    """sum_t x_t x_t+k for k = 0..max_lag, by FFT (one pass for every lag)."""
    size = 1 << (2 * x.size - 1).bit_length()
    spectrum = np.fft.rfft(x, size)
    return np.fft.irfft(spectrum * np.conj(spectrum), size)[: max_lag + 1]


def _inflation(residuals, rows, max_lag: int) -> np.ndarray:
    """kappa_i = 1 + 2 sum_k rho_k over the initial positive run of the residual autocorrelation."""
    kappa = np.ones(6)
    for i in range(6):
        products, pairs = np.zeros(max_lag + 1), np.zeros(max_lag + 1)
        for residual, mask in zip(residuals, rows):
            m = mask[:, i].astype(float)
            lags = min(max_lag, m.size - 1)
            products[: lags + 1] += _lagged_products(residual[:, i] * m, lags)
            pairs[: lags + 1] += np.round(_lagged_products(m, lags))
        if not (pairs[0] > 0 and products[0] > 0.0):
            continue
        variance = products[0] / pairs[0]
        total = 0.0
        for lag in range(1, max_lag + 1):
            if not pairs[lag]:
                break
            rho = products[lag] / pairs[lag] / variance
            if rho <= 0.0:
                break
            total += rho
        kappa[i] = 1.0 + 2.0 * total
    return kappa


def _inverse(values: np.ndarray) -> np.ndarray:
    """1 / values, 0 where a value is 0 (a slider without rows gets no weight)."""
    return np.divide(1.0, values, out=np.zeros_like(values), where=values > 0.0)


def _fit_rows(designs, rows, weights_per_slider, with_payload):
    weights = [m * weights_per_slider[None, :] for m in rows]
    return _solve(*_normal_equations(designs, weights, with_payload))


def _choose_delay(samples: RunSamples, parameters: HexapodParameters, with_payload: bool) -> _Design:
    """The design at the delay (0..max_delay_steps) that leaves the least robust residual.

    Per delay: a fit, the rows beyond ``outlier_threshold`` robust standard deviations dropped, a
    refit; the score is the robust standard deviation of what is left (over the sliders, in
    quadrature). A collision or a fault in the run then cannot pick the delay.
    """
    settings = parameters.identification
    best, best_score = None, np.inf
    for delay in range(settings.max_delay_steps + 1):
        design = _Design(samples, delay, settings.min_speed)
        rows = design.candidates
        if not rows.any():
            best = best or design
            continue
        theta, _ = _fit_rows([design], [rows.astype(float)], np.ones(6), with_payload)
        residual = _residuals([design], theta)[0]
        sigma = _robust_sigma([residual], [rows])
        kept = rows & (np.abs(residual) <= settings.outlier_threshold * sigma[None, :])
        theta, _ = _fit_rows([design], [kept.astype(float)], np.ones(6), with_payload)
        score = float(np.sqrt(np.sum(_robust_sigma(_residuals([design], theta), [kept]) ** 2)))
        if score < best_score:
            best, best_score = design, score
    return best


def identify_samples(runs: list[RunSamples], parameters: HexapodParameters, with_payload: bool) -> Identification:
    """Fit the drive parameters (and the payload) to the prepared runs; see the module doc."""
    settings = parameters.identification
    designs = [_choose_delay(samples, parameters, with_payload) for samples in runs]
    candidates = [d.candidates for d in designs]
    rows = [c.copy() for c in candidates]
    weights = np.ones(6)
    theta = None
    for _ in range(settings.outlier_iterations):
        theta, _ = _fit_rows(designs, [r.astype(float) for r in rows], weights, with_payload)
        residuals = _residuals(designs, theta)
        sigma = _robust_sigma(residuals, rows)
        weights = _inverse(sigma**2)
        updated = [c & (np.abs(r) <= settings.outlier_threshold * sigma[None, :]) for c, r in zip(candidates, residuals)]
        if all(np.array_equal(u, r) for u, r in zip(updated, rows)):
            break
        rows = updated
    theta, _ = _fit_rows(designs, [r.astype(float) for r in rows], weights, with_payload)
    residuals = _residuals(designs, theta)
    used = np.sum([r.sum(axis=0) for r in rows], axis=0)
    sigma = np.sqrt(np.sum([np.sum(res**2 * r, axis=0) for res, r in zip(residuals, rows)], axis=0)
                    / np.maximum(used - _PER_SLIDER, 1))
    max_lag = _AUTOCORRELATION_WINDOWS * max(s.window for s in runs)
    kappa = _inflation(residuals, rows, max_lag)
    final_weights = _inverse(sigma**2 * kappa)
    theta, covariance = _fit_rows(designs, [r.astype(float) for r in rows], final_weights, with_payload)

    counts = RowCounts(
        used=used.astype(int),
        invalid=np.sum([d.invalid.sum(axis=0) for d in designs], axis=0),
        slow=np.sum([d.slow.sum(axis=0) for d in designs], axis=0),
        saturated=np.sum([d.saturated.sum(axis=0) for d in designs], axis=0),
        outliers=np.sum([(c & ~r).sum(axis=0) for c, r in zip(candidates, rows)], axis=0),
    )
    quantile = float(norm.ppf(0.5 + 0.5 * settings.confidence_level))
    half_widths = quantile * np.sqrt(np.maximum(np.diag(covariance), 0.0))
    estimates = _classify(theta, half_widths, counts, parameters, with_payload)

    drives = parameters.actuators
    base = np.column_stack((drives.reflected_inertia, drives.viscous_friction, drives.coulomb_friction)).ravel()
    fits, before_sq, after_sq = [], np.zeros(6), np.zeros(6)
    for design, row in zip(designs, rows):
        samples = design.samples
        before = samples.rigid + design.predicted(base)
        after = samples.rigid + design.predicted(theta)
        measured = design.measured
        fits.append(RunFit(samples.label, design.delay, samples.t, row, design.candidates, measured, before, after))
        before_sq += np.sum(np.where(row, measured - before, 0.0) ** 2, axis=0)
        after_sq += np.sum(np.where(row, measured - after, 0.0) ** 2, axis=0)
    total = np.maximum(used, 1)
    return Identification(
        estimates=estimates, runs=fits, counts=counts, sigma=sigma, inflation=kappa,
        confidence_level=settings.confidence_level,
        rms_before=np.sqrt(before_sq / total), rms_after=np.sqrt(after_sq / total),
    )


def _classify(theta, half_widths, counts: RowCounts, parameters: HexapodParameters, with_payload: bool) -> list[Estimate]:
    settings = parameters.identification
    names = parameters.ros.joint_names
    estimates = []

    def judged(name, slider, value, half_width, rows, saturated, left_out):
        resolution = getattr(settings.resolution, name)
        unit = UNITS[name]
        if rows < settings.min_samples:
            # Saturation is the cause when it took at least as many moving rows as it left.
            cause = "saturation: too few unsaturated samples" if saturated and saturated >= rows else "too few samples"
            reason = f"{cause}: {rows} rows (min_samples {settings.min_samples}); left out: {left_out}"
        elif not half_width <= resolution:
            reason = (
                f"poor excitation: the {settings.confidence_level:.0%} interval +-{half_width:.3g} {unit} is wider "
                f"than the resolution {resolution:g} {unit}"
            )
        elif value < -resolution:
            reason = f"inconsistent: {value:.4g} +- {half_width:.3g} {unit} is negative (the model does not fit these data)"
        else:
            return Estimate(name, slider, float(value), float(half_width), True)
        return Estimate(name, slider, float(value), float(half_width), False, reason)

    def left_out(slow, saturated, invalid, outliers):
        return (f"{slow} slower than min_speed, {saturated} saturated, {invalid} without a full window or "
                f"command, {outliers} outliers")

    for i in range(6):
        why = left_out(counts.slow[i], counts.saturated[i], counts.invalid[i], counts.outliers[i]) + f" ({names[i]})"
        for j, name in enumerate(DRIVE_PARAMETERS):
            k = _PER_SLIDER * i + j
            estimates.append(judged(name, i, theta[k], half_widths[k], int(counts.used[i]), int(counts.saturated[i]), why))
    if with_payload:
        totals = [int(np.sum(c)) for c in (counts.slow, counts.saturated, counts.invalid, counts.outliers)]
        estimates.append(judged(PAYLOAD, None, theta[-1], half_widths[-1], int(counts.used.sum()), totals[1],
                                left_out(*totals) + " (all sliders)"))
    return estimates
