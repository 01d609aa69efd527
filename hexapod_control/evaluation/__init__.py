"""Evaluation of recorded runs (pure Python, no rclpy): bags in, metrics, plots and a report out.

* :mod:`.bag` - decode a bag (``hexapod_control.bags.read_bag``) into time series.
* :mod:`.metrics` - tracking errors from the FK of the joint states, forces, saturation, speeds.
* :mod:`.model_check` - inverse-dynamics forces of the recorded motion vs the recorded forces.
* :mod:`.plots`, :mod:`.report` - PNG figures and the Markdown report.
* :mod:`.replay` - a bag through a controller offline (``hexapod_replay``).
* :mod:`.evaluate` - bags to one report (:func:`evaluate_bags`): what hexapod_evaluate, the main job and the sweeps call.
* :mod:`.cli` - ``hexapod_evaluate`` / ``python -m hexapod_control.evaluation``.
"""

from hexapod_control.lazy_exports import lazy_exports

# Each public name and the module that defines it, imported on first use (lazy_exports.py).
_EXPORTS = {
    "hexapod_control.evaluation.bag": ("RunData", "load_run"),
    "hexapod_control.evaluation.evaluate": ("evaluate_bags",),
    "hexapod_control.evaluation.metrics": ("RunMetrics", "evaluate_run"),
    "hexapod_control.evaluation.replay": ("ReplayResult", "replay_run"),
}
__all__, __getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
