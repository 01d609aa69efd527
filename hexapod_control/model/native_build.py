"""How the generated C library is built: its sources, flags, file name and source digest.

One definition for both builds: setup.py compiles the library at install (``pip install``,
``colcon build``) and compiled.py compiles it at first use when no installed one fits (the
developer fallback). setup.py reads this file by path, because the package cannot be imported
while it is being built (numpy and the rest may not be installed yet): so it imports nothing
from the package.

Flags: no ``-ffast-math`` and no FMA contraction, so that C evaluates the same operations in the
same order as the generated Python code and rounds alike (compiled.py's module docstring).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

GENERATED_PACKAGE = "hexapod_control.model.generated"
# In hexapod_control/model/generated/, compiled together into one shared library (loaded with ctypes).
SOURCES = ("dynamics_terms.c", "control_cycle.c")
LIBRARY_NAME = "libhexapod_native.so"
COMPILE_FLAGS = ("-O2", "-fno-math-errno", "-ffp-contract=off")
LIBRARIES = ("m",)
# The build defines it as the digest of the sources; compiled.py loads a library only when it matches.
DIGEST_MACRO = "HEXAPOD_SOURCE_SHA256"


def source_digest(texts: Iterable[bytes]) -> str:
    """SHA-256 (hex) over the SHA-256 of each source text, in SOURCES order."""
    digest = hashlib.sha256()
    for text in texts:
        digest.update(hashlib.sha256(text).digest())
    return digest.hexdigest()


def digest_definition(digest: str) -> str:
    """The value of DIGEST_MACRO: a C string literal."""
    return f'"{digest}"'
