"""Optional compiled (C) backend of the generated dynamics terms.

``python -m hexapod_control.codegen`` writes two twins from the same CSE'd expressions:
:mod:`hexapod_control.model.generated.dynamics_terms` (plain Python, the reference and the fallback)
and ``generated/dynamics_terms.c``. At first use, :func:`load` compiles the C file with the
system compiler into a per-user cache and wraps each function with ctypes so that it takes and
returns exactly what its Python twin does (same names, arguments, return structure, and
ZeroDivisionError / ValueError where the Python code raises them).

Environment:

``HEXAPOD_DYNAMICS_BACKEND``
    ``auto`` (default): the C backend if it compiles and loads, else the Python module, with one
    logged warning. ``python``: always the Python module (no compiler is run). ``c``: the C
    backend or an error (:class:`CompilationError`), never a silent fallback.
``CC``
    The C compiler command (may carry arguments, e.g. ``"ccache gcc"``); default ``cc``.
``XDG_CACHE_HOME``
    Libraries go to ``$XDG_CACHE_HOME/hexapod_control/`` (default ``~/.cache/hexapod_control/``;
    a private temporary directory if that is not writable). A library's file name carries the
    SHA-256 of the C source, compiler command and flags, so a cached one is reused as long as all
    three are unchanged, and compilation (about 10-30 s) happens once per machine and version.

Flags: ``-O2 -shared -fPIC -fno-math-errno -ffp-contract=off`` (no ``-ffast-math`` and no FMA
contraction: C evaluates the same operations in the same order as the Python code, so the results
agree to round-off; they were bit-identical with gcc 12 on x86-64, and the tests require 1e-12).
The wrappers keep preallocated ctypes buffers per thread and function (ctypes releases the GIL
during the C call), and a parameter tuple passed again (the same object) is not copied again.
Per call, the wrapper adds about 1-1.5 us to the C time (copying in and out, the ctypes call).
"""

from __future__ import annotations

import ctypes
import hashlib
import inspect
import logging
import os
import platform
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import types
from collections.abc import Sequence
from importlib import resources
from pathlib import Path

from hexapod_control.errors import CompilationError
from hexapod_control.model.generated import dynamics_terms as python_terms

_LOG = logging.getLogger(__name__)

BACKEND_VARIABLE = "HEXAPOD_DYNAMICS_BACKEND"
BACKENDS = ("auto", "python", "c")
COMPILE_FLAGS = ("-O2", "-shared", "-fPIC", "-fno-math-errno", "-ffp-contract=off")
LINK_FLAGS = ("-lm",)
COMPILE_TIMEOUT = 900.0  # [s] -O2 on the 8000-line file takes 10-30 s on a loaded 2-core machine
_GENERATED_PACKAGE = "hexapod_control.model.generated"
_SIGNATURE = re.compile(r"^(\w+)\(([^)]*)\)->(vector|pair)\[(\d+)\]$")
_ARGUMENT = re.compile(r"^(\w+)\[(\d+)\]$")


# ------------------------------------------------------------------------------ compilation
def default_compiler() -> list[str]:
    return shlex.split(os.environ.get("CC") or "cc")


def cache_directory() -> Path:
    """``$XDG_CACHE_HOME/hexapod_control`` or ``~/.cache/hexapod_control``, else a private temp dir."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    preferred = Path(base) / "hexapod_control"
    try:
        preferred.mkdir(parents=True, exist_ok=True)
        if os.access(preferred, os.W_OK | os.X_OK):
            return preferred
    except OSError:
        pass
    uid = os.getuid() if hasattr(os, "getuid") else 0
    shared = Path(tempfile.gettempdir()) / f"hexapod_control-{uid}"
    try:
        shared.mkdir(mode=0o700, exist_ok=True)
        status = shared.lstat()
        # Never load libraries from a directory that someone else controls.
        if not shared.is_symlink() and status.st_uid == uid and not status.st_mode & 0o022:
            return shared
    except OSError:
        pass
    return Path(tempfile.mkdtemp(prefix="hexapod_control-"))


def library_key(source: bytes, compiler: Sequence[str], flags: Sequence[str] = COMPILE_FLAGS) -> str:
    """SHA-256 (hex) of the C source, the compiler command, the flags and the platform."""
    digest = hashlib.sha256(source)
    for item in (*compiler, *flags, *LINK_FLAGS, sys.platform, platform.machine()):
        digest.update(b"\0" + item.encode())
    return digest.hexdigest()


def library_path(source: bytes, compiler: Sequence[str], cache_dir: Path) -> Path:
    """Where the library for ``source`` built by ``compiler`` is cached."""
    return Path(cache_dir) / f"dynamics_terms-{library_key(source, compiler)[:32]}.so"


def compile_library(
    source: bytes, compiler: Sequence[str] | None = None, cache_dir: Path | None = None
) -> tuple[Path, bool]:
    """(path of the shared library for ``source``, whether this call compiled it).

    Compiles to a temporary file in the cache directory and renames it into place, so concurrent
    processes never see a partial library (the last rename wins; the contents are identical), and
    a library that a running process has loaded is never overwritten in place (that would crash
    it with SIGBUS).
    """
    compiler = list(compiler) if compiler is not None else default_compiler()
    cache_dir = Path(cache_dir) if cache_dir is not None else cache_directory()
    target = library_path(source, compiler, cache_dir)
    if target.is_file():
        return target, False
    if not compiler or shutil.which(compiler[0]) is None:
        raise CompilationError(f"no C compiler: {' '.join(compiler) or '(empty CC)'} not found")
    cache_dir.mkdir(parents=True, exist_ok=True)
    descriptor, temporary = tempfile.mkstemp(prefix=target.name + ".", suffix=".tmp", dir=cache_dir)
    os.close(descriptor)
    command = [*compiler, *COMPILE_FLAGS, "-x", "c", "-", "-o", temporary, *LINK_FLAGS]
    start = time.perf_counter()
    try:
        result = subprocess.run(command, input=source, capture_output=True, timeout=COMPILE_TIMEOUT, check=False)
        if result.returncode != 0:
            message = result.stderr.decode(errors="replace").strip().splitlines()[-20:]
            raise CompilationError(f"`{' '.join(command)}` failed ({result.returncode}): " + "\n".join(message))
        os.replace(temporary, target)
    except (OSError, subprocess.SubprocessError) as error:
        raise CompilationError(f"`{' '.join(command)}` failed: {error}") from error
    finally:
        if os.path.exists(temporary):
            os.unlink(temporary)
    _LOG.info("compiled the C dynamics backend in %.1f s: %s", time.perf_counter() - start, target)
    return target, True


# ------------------------------------------------------------------------------ wrappers
_WRAPPER_TEMPLATE = '''
def {name}({arguments}, parameters):
    try:
        {buffers}, parameter_buffer, cached, out = _local.{name}
    except AttributeError:
        {buffers}, parameter_buffer, cached, out = _local.{name} = _new_buffers()
{copies}
    if parameters is not cached[0]:
        parameter_buffer[:] = parameters
        cached[0] = parameters if type(parameters) is tuple else None
    status = _function({buffers}, parameter_buffer, out)
    if status:
        _raise(status, "{name}")
    return {result}
'''
_RESULTS = {"vector": "out[:]", "pair": "(out[0], out[1])"}


def _raise(status: int, name: str):
    if status & 1:
        raise ZeroDivisionError(f"float division by zero (C backend, {name})")
    raise ValueError(f"math domain error (C backend, {name})")


def _wrap(function, name: str, inputs: list[tuple[str, int]], shape: str, n_outputs: int, local):
    """A Python function with the signature and return structure of the generated Python one.

    Inputs are copied by slice assignment into preallocated ctypes arrays (the fastest way
    measured, about 2x faster than building ``(c_double * n)(*values)`` per call; it also
    rejects a wrong length with ValueError, as the Python twin's unpacking does).
    """
    array_types = [ctypes.c_double * size for _, size in inputs]
    output_type = ctypes.c_double * n_outputs

    def new_buffers():
        return (*(t() for t in array_types[:-1]), array_types[-1](), [None], output_type())

    names = [argument for argument, _ in inputs[:-1]]
    buffers = ", ".join(f"_{argument}" for argument in names)
    source = _WRAPPER_TEMPLATE.format(
        name=name,
        arguments=", ".join(names),
        buffers=buffers,
        copies="\n".join(f"    _{argument}[:] = {argument}" for argument in names),
        result=_RESULTS[shape],
    )
    namespace = {"_local": local, "_new_buffers": new_buffers, "_function": function, "_raise": _raise}
    exec(compile(source, f"<hexapod_control.model.compiled {name}>", "exec"), namespace)  # noqa: S102 - our own template
    wrapper = namespace[name]
    wrapper.__doc__ = getattr(python_terms, name).__doc__
    wrapper.__module__ = __name__
    return wrapper


def _string(library, symbol: str) -> str:
    return ctypes.cast(ctypes.addressof(ctypes.c_char.in_dll(library, symbol)), ctypes.c_char_p).value.decode()


def _python_source_digest() -> str | None:
    try:
        data = resources.files(_GENERATED_PACKAGE).joinpath("dynamics_terms.py").read_bytes()
    except (OSError, ValueError):
        return None
    return hashlib.sha256(data).hexdigest()


def _bind(library, path: Path) -> types.ModuleType:
    """The module-like object of wrapped C functions, checked against the Python twin."""
    try:
        digest = _string(library, "hexapod_python_source_sha256")
        parameter_names = tuple(_string(library, "hexapod_parameter_names").split())
        signatures = _string(library, "hexapod_signatures").split()
    except ValueError as error:  # symbol missing
        raise CompilationError(f"{path} is not a hexapod dynamics library: {error}") from error
    python_digest = _python_source_digest()
    if python_digest is not None and python_digest != digest:
        raise CompilationError(
            "generated/dynamics_terms.c does not belong to generated/dynamics_terms.py "
            "(regenerate both with `python -m hexapod_control.codegen`)"
        )
    if parameter_names != python_terms.PARAMETER_NAMES:
        raise CompilationError("the C and Python generated code disagree on PARAMETER_NAMES")
    module = types.ModuleType(__name__ + ".c_terms", "The generated dynamics terms, compiled (see hexapod_control.model.compiled).")
    module.PARAMETER_NAMES = python_terms.PARAMETER_NAMES
    module.SYMPY_VERSION = _string(library, "hexapod_sympy_version")
    module.BACKEND = "c"
    module.LIBRARY_PATH = path
    module.FUNCTION_NAMES = []
    local = threading.local()
    for line in signatures:
        match = _SIGNATURE.match(line)
        if match is None:
            raise CompilationError(f"unreadable signature {line!r} in {path}")
        name, arguments, shape, size = match.groups()
        inputs = [(m.group(1), int(m.group(2))) for m in map(_ARGUMENT.match, arguments.split(","))]
        python_function = getattr(python_terms, name, None)
        if python_function is None or list(inspect.signature(python_function).parameters) != [a for a, _ in inputs]:
            raise CompilationError(f"{name}: the C signature {line!r} differs from the Python one")
        function = library[name]
        function.restype = ctypes.c_int
        setattr(module, name, _wrap(function, name, inputs, shape, int(size), local))
        module.FUNCTION_NAMES.append(name)
    module._library = library  # keep the library loaded as long as the wrappers live
    return module


def c_source() -> bytes:
    """The text of generated/dynamics_terms.c (shipped as package data)."""
    try:
        return resources.files(_GENERATED_PACKAGE).joinpath("dynamics_terms.c").read_bytes()
    except OSError as error:
        raise CompilationError(f"generated/dynamics_terms.c is not installed: {error}") from error


def load(compiler: Sequence[str] | str | None = None, cache_dir: Path | str | None = None) -> types.ModuleType:
    """Compile (or reuse from the cache) and load the C backend; CompilationError if impossible.

    The result has the functions of :mod:`hexapod_control.model.generated.dynamics_terms` with the
    same signatures and results, plus ``BACKEND = "c"``, ``LIBRARY_PATH`` and ``COMPILED`` (True
    when this call ran the compiler, False when the cached library was reused).
    """
    if isinstance(compiler, str):
        compiler = shlex.split(compiler)
    source = c_source()
    path, compiled = compile_library(source, compiler, cache_dir)
    try:
        library = ctypes.CDLL(str(path))
    except OSError as error:
        if compiled:
            raise CompilationError(f"cannot load {path}: {error}") from error
        path.unlink(missing_ok=True)  # a damaged cache entry (unlinked, not overwritten): build it again, once
        path, compiled = compile_library(source, compiler, cache_dir)
        try:
            library = ctypes.CDLL(str(path))
        except OSError as error2:
            raise CompilationError(f"cannot load {path}: {error2}") from error2
    module = _bind(library, path)
    module.COMPILED = compiled
    return module


# ------------------------------------------------------------------------------ selection
_selected: dict[str, types.ModuleType] = {}
_select_lock = threading.Lock()


def backend_name(terms) -> str:
    """"c" or "python" for a module returned by :func:`select_backend`."""
    return getattr(terms, "BACKEND", "python")


def select_backend(choice: str | None = None) -> types.ModuleType:
    """The generated terms to use: ``choice`` or ``$HEXAPOD_DYNAMICS_BACKEND`` (auto|python|c).

    Memoised per choice, so a process compiles/loads at most once and warns at most once.
    """
    if choice is None:
        choice = os.environ.get(BACKEND_VARIABLE, "")
    choice = choice.strip().lower() or "auto"
    if choice not in BACKENDS:
        raise ValueError(f"{BACKEND_VARIABLE}={choice!r}: expected one of {', '.join(BACKENDS)}")
    with _select_lock:
        if choice not in _selected:
            _selected[choice] = _select(choice)
        return _selected[choice]


def _select(choice: str) -> types.ModuleType:
    if choice == "python":
        return python_terms
    try:
        return load()
    except CompilationError as error:
        if choice == "c":
            raise
        _LOG.warning(
            "C dynamics backend unavailable, using the (slower) Python generated code: %s "
            "(set %s=python to skip the compiler)",
            error,
            BACKEND_VARIABLE,
        )
        return python_terms
