"""Public names a package re-exports, imported on first use (PEP 562).

A package lists each name with the module that defines it; ``from hexapod_control.control import
ControlLoop`` then imports ``control.loop`` at that moment, so that importing a package (or the
``hexapod`` command's ``--help``) loads neither NumPy nor rclpy, and no package's ``__init__``
imports its children ahead of them.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping


def lazy_exports(package: str, public: Mapping[str, str]) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of ``package``, whose names ``public`` maps to their modules."""

    def __getattr__(name: str):
        module = public.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        setattr(sys.modules[package], name, value)  # kept, as an eager import would have
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(public))

    return __getattr__, __dir__
