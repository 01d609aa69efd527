"""Public names a package re-exports, imported on first use (PEP 562).

A package lists each name with the module that defines it; ``from hexapod_control.control import
ControlLoop`` then imports ``control.loop`` at that moment, so that importing a package (or the
``hexapod`` command's ``--help``) loads neither NumPy nor rclpy, and no package's ``__init__``
imports its children ahead of them.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping, Sequence


def lazy_exports(package: str, exports: Mapping[str, Sequence[str]]
                 ) -> tuple[list[str], Callable[[str], object], Callable[[], list[str]]]:
    """``__all__``, ``__getattr__`` and ``__dir__`` of ``package``, whose ``exports`` name the public
    names each defining module gives it."""
    public = {name: module for module, names in exports.items() for name in names}

    def __getattr__(name: str):
        module = public.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        setattr(sys.modules[package], name, value)  # kept, as an eager import would have
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(public))

    return sorted(public), __getattr__, __dir__
