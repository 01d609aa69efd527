"""The one error tree: every public exception class of the package derives from HexapodError and
is importable from hexapod_control.errors and from the package root.

The classes are found by importing every module of the package and looking at what each defines,
so a new error class anywhere fails here until it joins the tree.
"""

import importlib
import inspect
import pkgutil
from pathlib import Path

import pytest

import hexapod_control
from hexapod_control import errors
from hexapod_control.bags import read_bag
from hexapod_control.model import native_build


def _is_ros_package(module_name: str) -> bool:
    top = module_name.split(".")[0]
    return top == "rclpy" or top.endswith(("_msgs", "_interfaces"))


OPTIONAL_ENGINES = {"hexapod_control.simulation.dart_plant": "dartpy"}  # module -> what it may miss
# The C library a build puts beside the generated sources: its ".so" makes pkgutil list it as an
# extension module, but it is a ctypes library (no module init), loaded by model/compiled.py.
NATIVE_LIBRARY = "hexapod_control.model.generated." + Path(native_build.LIBRARY_NAME).stem


def _package_modules():
    """Every importable module of hexapod_control; ROS nodes are skipped only when ROS is absent."""
    modules = []
    for info in pkgutil.walk_packages(hexapod_control.__path__, "hexapod_control."):
        if info.name.rsplit(".", 1)[-1] == "__main__" or info.name == NATIVE_LIBRARY:
            continue  # importing a __main__ runs its command line; the library is not a module
        try:
            modules.append(importlib.import_module(info.name))
        except ModuleNotFoundError as error:
            # Only the rclpy nodes may miss a dependency, and only a ROS one, and the DART plant its
            # engine (requirements-dev.txt only); anything else is a bug.
            ros_node = info.name.startswith("hexapod_control.ros.") and _is_ros_package(error.name or "")
            if not (ros_node or OPTIONAL_ENGINES.get(info.name) == error.name):
                raise
    return modules


def _exception_classes(modules):
    """name -> class of every exception class defined (not imported) in ``modules``."""
    found = {}
    for module in modules:
        for name, value in vars(module).items():
            if inspect.isclass(value) and issubclass(value, BaseException) and value.__module__ == module.__name__:
                found[f"{module.__name__}.{name}"] = value
    return found


MODULES = _package_modules()
CLASSES = _exception_classes(MODULES)
# Module-private signals (``_Name``) never leave the module that raises them: not part of the API.
PUBLIC = {path: cls for path, cls in CLASSES.items() if not cls.__name__.startswith("_")}


def test_the_walk_sees_the_whole_package():
    names = {module.__name__ for module in MODULES}
    # One module per subpackage at least, so a broken walk cannot pass the checks below vacuously.
    for expected in (
        "hexapod_control.errors",
        "hexapod_control.model.compiled",
        "hexapod_control.bags.reader",
        "hexapod_control.simulation.embedded",
        "hexapod_control.control.controllers",
        "hexapod_control.evaluation.cli",
        "hexapod_control.conventions",
        "hexapod_control.ros",
    ):
        assert expected in names
    assert "hexapod_control.errors.HexapodError" in PUBLIC and len(PUBLIC) > 1


@pytest.mark.parametrize("path", sorted(PUBLIC))
def test_every_public_exception_derives_from_hexapod_error(path):
    assert issubclass(PUBLIC[path], errors.HexapodError), f"{path} is not a HexapodError"


@pytest.mark.parametrize("path", sorted(PUBLIC))
def test_every_public_exception_is_exported_from_errors_and_root(path):
    cls = PUBLIC[path]
    assert getattr(errors, cls.__name__, None) is cls, f"{path} is not importable from hexapod_control.errors"
    assert getattr(hexapod_control, cls.__name__, None) is cls, f"{path} is not importable from hexapod_control"
    assert cls.__name__ in hexapod_control.__all__, f"{cls.__name__} is missing from hexapod_control.__all__"


def test_former_builtin_bases_are_kept():
    # Callers written before the tree catch these by their builtin base.
    assert issubclass(errors.CompilationError, RuntimeError)
    for cls in (errors.ParameterError, errors.InvalidInputError, errors.UnreachablePoseError):
        assert issubclass(cls, ValueError)


def test_a_bag_error_is_caught_as_a_hexapod_error(tmp_path):
    with pytest.raises(errors.HexapodError, match="no such bag"):
        read_bag(tmp_path / "missing")
