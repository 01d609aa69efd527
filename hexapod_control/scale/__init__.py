"""Controllers judged at scale: robustness sweeps, gain tuning and bag archives on Ray.

* :mod:`.spec` reads a sweep spec (YAML) and expands it into cases, each with its own seed;
* :mod:`.case` runs one case in closed loop (the lockstep loop, a plant behind its loop delay) and
  returns its row, plus the linear verdict of ``control/margins.py`` for the same loop;
* :mod:`.engine` runs many cases on Ray: local cores by default, a cluster with an address;
* :mod:`.sweep` (``hexapod_sweep``), :mod:`.tune` (``hexapod_tune``) and :mod:`.evaluate`
  (``hexapod_evaluate_many``) are the commands.

Ray, Ray Tune, Optuna and pyarrow are imported inside the functions that need them, so the core
package and the nodes import without them (test_architecture.py checks it).
"""

from hexapod_control.lazy_exports import lazy_exports

# Each public name and the module that defines it, imported on first use (lazy_exports.py).
_EXPORTS = {
    "hexapod_control.scale.case": ("RowMetrics", "run_case"),
    "hexapod_control.scale.engine": ("Engine",),
    "hexapod_control.scale.spec": ("Case", "SweepSpec", "load_spec"),
}
__all__, __getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
