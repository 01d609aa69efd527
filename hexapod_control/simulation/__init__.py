"""Plants the controllers drive: the embedded reduced-model simulator, a MuJoCo model and the Gazebo
description in DART (Gazebo's physics engine)."""

from __future__ import annotations

from hexapod_control.errors import ParameterError
from hexapod_control.lazy_exports import lazy_exports
from hexapod_control.model.parameters import HexapodParameters
from hexapod_control.simulation.plant import Plant

BACKENDS = ("embedded", "mujoco", "dart")


def make_plant(backend: str, parameters: HexapodParameters) -> Plant:
    """The plant of a backend name; MuJoCo and DART are imported only when asked for."""
    if backend == "embedded":
        from hexapod_control.simulation.embedded import EmbeddedSimulator

        return EmbeddedSimulator(parameters)
    if backend == "mujoco":
        from hexapod_control.simulation.mujoco_plant import MujocoPlant

        return MujocoPlant(parameters)
    if backend == "dart":
        from hexapod_control.simulation.dart_plant import DartPlant

        return DartPlant(parameters)
    raise ParameterError(f"unknown simulation backend {backend!r}; expected one of {BACKENDS}")


# The other public names, imported on first use (lazy_exports.py).
_EXPORTS = {
    "hexapod_control.simulation.delay": ("DelayedPlant", "with_loop_delay"),
    "hexapod_control.simulation.lockstep": ("LockstepLoop", "LoopRecord"),
    "hexapod_control.simulation.lockstep_recording": ("RecordWriter",),
    "hexapod_control.simulation.plant": ("Plant",),
}
_lazy_names, __getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
__all__ = sorted([*_lazy_names, "BACKENDS", "make_plant"])
