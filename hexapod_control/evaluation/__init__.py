"""Evaluation of recorded runs (pure Python, no rclpy): bags in, metrics, plots and a report out.

* :mod:`.bag` - decode a bag (``hexapod_control.bags.read_bag``) into time series.
* :mod:`.metrics` - tracking errors from the FK of the joint states, forces, saturation, speeds.
* :mod:`.model_check` - inverse-dynamics forces of the recorded motion vs the recorded forces.
* :mod:`.plots`, :mod:`.report` - PNG figures and the Markdown report.
* :mod:`.replay` - a bag through a controller offline (``hexapod_replay``).
* :mod:`.cli` - ``hexapod_evaluate`` / ``python -m hexapod_control.evaluation``.
"""
