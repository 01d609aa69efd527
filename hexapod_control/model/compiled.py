"""Optional compiled (C) backend of the generated dynamics terms, and the library of the control cycle.

``python -m hexapod_control.codegen`` writes two twins from the same CSE'd expressions:
:mod:`hexapod_control.model.generated.dynamics_terms` (plain Python, the reference and the fallback)
and ``generated/dynamics_terms.c``, and the C control cycle ``generated/control_cycle.c``. Both C
files make one shared library (:mod:`hexapod_control.model.native_build`). :func:`load` wraps each
dynamics function with ctypes so that it takes and returns exactly what its Python twin does (same
names, arguments, return structure, and ZeroDivisionError / ValueError where the Python code raises
them); hexapod_control/control/compiled_cycle.py binds the cycle functions of the same library.

Where the library comes from, in order:

1. Installed: setup.py builds it when the package is built (``pip install``, ``colcon build``;
   ``python setup.py build_ext --inplace`` in a source tree) into the package, beside the sources.
   It is used when it was built from the sources that are installed (a digest compiled into it).
2. Developer fallback (e.g. the source tree with PYTHONPATH, no build, or a stale in-place build):
   compiled at first use into a per-user cache, once per machine and source version (10-30 s). A
   lock file beside the library makes concurrent processes wait for one compilation instead of each
   running the compiler.

Environment:

``HEXAPOD_DYNAMICS_BACKEND``
    ``auto`` (default): the C backend if it loads (or compiles), else the Python module, with one
    logged warning. ``python``: always the Python module (no compiler is run, no library loaded).
    ``c``: the C backend or an error (:class:`CompilationError`), never a silent fallback.
``CC``
    The C compiler command of the fallback (may carry arguments, e.g. ``"ccache gcc"``); default ``cc``.
``XDG_CACHE_HOME``
    The fallback's libraries go to ``$XDG_CACHE_HOME/hexapod_control/`` (default
    ``~/.cache/hexapod_control/``; ``$TMPDIR/hexapod_control-<uid>`` if that is not writable). A
    library's file name carries the SHA-256 of the C sources, compiler command and flags, so a cached
    one is reused as long as all three are unchanged. With no usable directory at all, the library is
    compiled into a temporary directory that is removed as soon as it is loaded (nothing is left behind,
    but every process compiles).

Flags (native_build.py, both builds): ``-O2 -fno-math-errno -ffp-contract=off`` (no ``-ffast-math``
and no FMA contraction: C evaluates the same operations in the same order as the Python code, so the
results agree to round-off; they were bit-identical with gcc 12 on x86-64, and the tests require 1e-12).
The wrappers keep preallocated ctypes buffers per thread and function (ctypes releases the GIL
during the C call), and a parameter tuple passed again (the same object) is not copied again.
What the wrapper adds to the C time per call is in doc/benchmarks.md.
"""

from __future__ import annotations

import contextlib
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
from collections.abc import Callable, Iterator, Sequence
from importlib import resources
from pathlib import Path

from hexapod_control.errors import CompilationError
from hexapod_control.model import native_build
from hexapod_control.model.generated import dynamics_terms as python_terms

try:
    import fcntl
except ImportError:  # not POSIX: no lock; the atomic rename still keeps a library whole
    fcntl = None

_LOG = logging.getLogger(__name__)

BACKEND_VARIABLE = "HEXAPOD_DYNAMICS_BACKEND"
BACKENDS = ("auto", "python", "c")
# The fallback runs the compiler directly: a position-independent shared library.
COMPILE_FLAGS = (*native_build.COMPILE_FLAGS, "-shared", "-fPIC")
LINK_FLAGS = tuple(f"-l{name}" for name in native_build.LIBRARIES)
COMPILE_TIMEOUT = 900.0  # [s] -O2 on the 9000-line file takes 5-30 s depending on the machine's load
_GENERATED_PACKAGE = native_build.GENERATED_PACKAGE
_SIGNATURE = re.compile(r"^(\w+)\(([^)]*)\)->(vector|pair)\[(\d+)\]$")
_ARGUMENT = re.compile(r"^(\w+)\[(\d+)\]$")


# ------------------------------------------------------------------------------ sources
def c_sources() -> tuple[bytes, ...]:
    """The texts of the library's C files (native_build.SOURCES, shipped as package data)."""
    try:
        return tuple(resources.files(_GENERATED_PACKAGE).joinpath(name).read_bytes() for name in native_build.SOURCES)
    except OSError as error:
        raise CompilationError(f"the generated C sources are not installed: {error}") from error


def installed_library_path() -> Path | None:
    """The library setup.py built into the package (beside the sources), if there is one."""
    candidate = resources.files(_GENERATED_PACKAGE).joinpath(native_build.LIBRARY_NAME)
    # A package inside a zip file cannot hold a loadable library.
    return candidate if isinstance(candidate, Path) and candidate.is_file() else None


# ------------------------------------------------------------------------------ compilation
def default_compiler() -> list[str]:
    return shlex.split(os.environ.get("CC") or "cc")


def cache_directory() -> Path | None:
    """``$XDG_CACHE_HOME/hexapod_control`` or ``~/.cache/hexapod_control``, else a private one in
    ``$TMPDIR``; None when neither is usable."""
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
    return None


def library_key(sources: Sequence[bytes], compiler: Sequence[str], flags: Sequence[str] = COMPILE_FLAGS) -> str:
    """SHA-256 (hex) of the C sources, the compiler command, the flags and the platform."""
    digest = hashlib.sha256(native_build.source_digest(sources).encode())
    for item in (*compiler, *flags, *LINK_FLAGS, sys.platform, platform.machine()):
        digest.update(b"\0" + item.encode())
    return digest.hexdigest()


def library_path(sources: Sequence[bytes], compiler: Sequence[str], cache_dir: Path) -> Path:
    """Where the library for ``sources`` built by ``compiler`` is cached."""
    return Path(cache_dir) / f"hexapod_native-{library_key(sources, compiler)[:32]}.so"


@contextlib.contextmanager
def _exclusive(lock_path: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``lock_path`` (created if needed; kept, as removing it would race)."""
    with open(lock_path, "a") as lock:
        if fcntl is not None:
            fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file is closed
        yield


def compile_library(
    source_files: Sequence[Path], compiler: Sequence[str] | None = None, cache_dir: Path | None = None
) -> tuple[Path, bool]:
    """(path of the shared library built from ``source_files``, whether this call compiled it), in
    the cache directory (:func:`compile_into`)."""
    compiler = list(compiler) if compiler is not None else default_compiler()
    cache_dir = Path(cache_dir) if cache_dir is not None else cache_directory()
    if cache_dir is None:
        raise CompilationError("no writable cache directory for the compiled library")
    sources = [Path(path).read_bytes() for path in source_files]
    target = library_path(sources, compiler, cache_dir)
    if target.is_file():
        return target, False
    if not compiler or shutil.which(compiler[0]) is None:
        raise CompilationError(f"no C compiler: {' '.join(compiler) or '(empty CC)'} not found")
    definition = f"-D{native_build.DIGEST_MACRO}={native_build.digest_definition(native_build.source_digest(sources))}"
    files = [str(path) for path in source_files]
    try:
        cache_dir.mkdir(parents=True, exist_ok=True)
        return target, compile_into(
            target, lambda output: [*compiler, *COMPILE_FLAGS, definition, *files, "-o", output, *LINK_FLAGS])
    except OSError as error:
        raise CompilationError(f"cannot compile into {cache_dir}: {error}") from error


def compile_into(target: Path, command: Callable[[str], list[str]]) -> bool:
    """Build the shared library ``target`` with ``command(output)`` (the compiler's arguments, writing
    the library at ``output``) unless it exists; whether this call compiled it, CompilationError when
    the compiler fails.

    Under an exclusive lock on ``<target>.lock``, so that concurrent processes compile once: the
    others wait, then find the library. It is compiled to a temporary file and renamed into place,
    so that no process ever sees a partial library, and a library that a running process has loaded
    is never overwritten in place (that would crash it with SIGBUS).
    """
    with _exclusive(target.with_name(target.name + ".lock")):
        if target.is_file():  # compiled by another process while this one waited
            return False
        descriptor, temporary = tempfile.mkstemp(prefix=target.name + ".", suffix=".tmp", dir=target.parent)
        os.close(descriptor)
        arguments = command(temporary)
        start = time.perf_counter()
        try:
            result = subprocess.run(
                arguments, stdin=subprocess.DEVNULL, capture_output=True, timeout=COMPILE_TIMEOUT, check=False
            )
            if result.returncode != 0:
                message = result.stderr.decode(errors="replace").strip().splitlines()[-20:]
                raise CompilationError(f"`{' '.join(arguments)}` failed ({result.returncode}): " + "\n".join(message))
            os.replace(temporary, target)
        except (OSError, subprocess.SubprocessError) as error:
            raise CompilationError(f"`{' '.join(arguments)}` failed: {error}") from error
        finally:
            if os.path.exists(temporary):
                os.unlink(temporary)
    _LOG.info("compiled the C library in %.1f s: %s", time.perf_counter() - start, target)
    return True


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

    Inputs are copied by slice assignment into preallocated ctypes arrays: no array is built per
    call (the faster way, doc/benchmarks.md), and a wrong length is rejected with ValueError, as
    the Python twin's unpacking does.
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


def read_string(library, symbol: str) -> str:
    """The C string constant ``symbol`` of a loaded library (ValueError when it has none)."""
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
        digest = read_string(library, "hexapod_python_source_sha256")
        parameter_names = tuple(read_string(library, "hexapod_parameter_names").split())
        signatures = read_string(library, "hexapod_signatures").split()
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
    module.SYMPY_VERSION = read_string(library, "hexapod_sympy_version")
    module.BACKEND = "c"
    module.LIBRARY_PATH = path
    module.LIBRARY = library  # the whole library (also the control cycle); keeps it loaded as long as the wrappers live
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
    return module


def _open(path: Path, digest: str) -> ctypes.CDLL:
    """dlopen ``path`` and check that it was built from the sources whose digest is ``digest``."""
    try:
        library = ctypes.CDLL(str(path))
    except OSError as error:
        raise CompilationError(f"cannot load {path}: {error}") from error
    try:
        built_from = read_string(library, "hexapod_source_sha256")
    except ValueError as error:
        raise CompilationError(f"{path} is not a hexapod library: {error}") from error
    if built_from != digest:
        raise CompilationError(
            f"{path} was built from other C sources than the installed ones (rebuild it: "
            "`python setup.py build_ext --inplace` in a source tree, or reinstall the package)"
        )
    return library


def load(compiler: Sequence[str] | str | None = None, cache_dir: Path | str | None = None) -> types.ModuleType:
    """The C backend: the installed library, else the one compiled into the cache; CompilationError if neither.

    With ``compiler`` or ``cache_dir`` given, the installed library is not considered (the developer
    fallback alone). The result has the functions of :mod:`hexapod_control.model.generated.dynamics_terms`
    with the same signatures and results, plus ``BACKEND = "c"``, ``LIBRARY`` (the ctypes library,
    which also holds the control cycle), ``LIBRARY_PATH``, ``INSTALLED`` (the library built at
    install) and ``COMPILED`` (True when this call ran the compiler).
    """
    if isinstance(compiler, str):
        compiler = shlex.split(compiler)
    digest = native_build.source_digest(c_sources())
    if compiler is None and cache_dir is None:
        installed = installed_library_path()
        if installed is not None:
            try:
                module = _bind(_open(installed, digest), installed)
            except CompilationError as error:
                _LOG.warning("not using the installed C library: %s; compiling the developer fallback", error)
            else:
                module.INSTALLED, module.COMPILED = True, False
                return module
    with contextlib.ExitStack() as stack:
        files = [
            stack.enter_context(resources.as_file(resources.files(_GENERATED_PACKAGE).joinpath(name)))
            for name in native_build.SOURCES
        ]
        directory = Path(cache_dir) if cache_dir is not None else cache_directory()
        if directory is None:
            # Compile where it can be deleted once loaded (a mapped library outlives its file):
            # slow, as every process compiles, but no process leaves a directory behind.
            _LOG.warning("no writable cache directory (XDG_CACHE_HOME, ~/.cache, TMPDIR): compiling for this process only")
            directory = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="hexapod_control-")))
        path, compiled = compile_library(files, compiler, directory)
        try:
            library = _open(path, digest)
        except CompilationError:
            if compiled:
                raise
            path.unlink(missing_ok=True)  # a damaged cache entry (unlinked, not overwritten): build it again, once
            path, compiled = compile_library(files, compiler, directory)
            library = _open(path, digest)
    module = _bind(library, path)
    module.INSTALLED, module.COMPILED = False, compiled
    return module


# ------------------------------------------------------------------------------ selection
_selected: dict[str, types.ModuleType] = {}
_select_lock = threading.Lock()


def backend_name(terms) -> str:
    """"c" or "python" for a module returned by :func:`select_backend`."""
    return getattr(terms, "BACKEND", "python")


def resolved_choice(choice: str | None, variable: str, choices: Sequence[str]) -> str:
    """``choice``, or ``$variable`` when it is None (default "auto"), normalised; ValueError naming
    the variable (whose values an argument takes too) when it is not one of ``choices``."""
    if choice is None:
        choice = os.environ.get(variable, "")
    choice = choice.strip().lower() or "auto"
    if choice not in choices:
        raise ValueError(f"{variable}={choice!r}: expected one of {', '.join(choices)}")
    return choice


def memoised_choice(choice: str | None, variable: str, choices: Sequence[str], cache: dict, lock, load):
    """``load(choice)`` for :func:`resolved_choice`, once per choice and process."""
    choice = resolved_choice(choice, variable, choices)
    with lock:
        if choice not in cache:
            cache[choice] = load(choice)
        return cache[choice]


def select_backend(choice: str | None = None) -> types.ModuleType:
    """The generated terms to use: ``choice`` or ``$HEXAPOD_DYNAMICS_BACKEND`` (auto|python|c).

    Memoised per choice, so a process compiles/loads at most once and warns at most once.
    """
    return memoised_choice(choice, BACKEND_VARIABLE, BACKENDS, _selected, _select_lock, _select)


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
