"""Input validation shared by the model, the dynamics and the simulators."""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from hexapod_control.errors import InvalidInputError


def as_vector(value, size: int, name: str, labels: Sequence[str] | None = None) -> tuple[float, ...]:
    """Validate a finite real vector of the given size, naming the offending entry on error."""
    if isinstance(value, np.ndarray):
        if value.shape != (size,):
            raise InvalidInputError(f"{name}: expected shape ({size},), got {value.shape}")
        value = value.tolist()
    try:
        vector = tuple(map(float, value))
    except (TypeError, ValueError) as error:
        shape = np.shape(value) if not isinstance(value, (str, bytes)) else ()
        raise InvalidInputError(
            f"{name}: expected {size} real numbers (shape ({size},)), got shape {shape}: {value!r}"
        ) from error
    if len(vector) != size:
        raise InvalidInputError(f"{name}: expected {size} values, got {len(vector)}")
    if all(map(math.isfinite, vector)):
        return vector
    for k, v in enumerate(vector):
        if not math.isfinite(v):
            label = labels[k] if labels else f"{name}[{k}]"
            raise InvalidInputError(f"{name}: {label} is {v} (must be finite)")
    return vector
