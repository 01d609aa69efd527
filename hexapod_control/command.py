"""The ``hexapod`` command: one entry point, a verb per job (``hexapod <verb> --help``).

Each verb names the function that runs it, as ``"module:function"``, in :data:`VERBS`; the
``hexapod_*`` executables of setup.py are aliases of the same functions. ``hexapod --help`` reads
the first line of each module's docstring from its source instead of importing it, so listing the
verbs loads neither NumPy nor rclpy.
"""

from __future__ import annotations

import ast
import importlib
import sys
from collections.abc import Sequence
from pathlib import Path

PROG = "hexapod"
PACKAGE_DIR = Path(__file__).resolve().parent

# verb -> "module:function"; the function takes the verb's arguments (argv without the verb).
VERBS = {
    "main-job": "hexapod_control.main_job:main",
    "evaluate": "hexapod_control.evaluation.cli:main",
    "replay": "hexapod_control.evaluation.replay:main",
    "identify": "hexapod_control.identification.cli:main",
    "margins": "hexapod_control.control.margins:main",
    "record": "hexapod_control.ros.recorder_node:main",
    "sim-stack": "hexapod_control.ros.stack:main",
    "robot-stack": "hexapod_control.ros.robot_stack:main",
    "fake-driver": "hexapod_control.ros.fake_driver:main",
    "simulator-node": "hexapod_control.ros.simulator_node:main",
    "controller-node": "hexapod_control.ros.controller_node:main",
    "trajectory-node": "hexapod_control.ros.trajectory_node:main",
    "fk-node": "hexapod_control.ros.fk_node:main",
    "description-joint-states": "hexapod_control.ros.description_joint_state_node:main",
    "inverse-dynamics": "hexapod_control.ros.inverse_dynamics_node:main",
    "gazebo-description": "hexapod_control.simulation.gazebo_description:main",
    "drive": "hexapod_control.ros.fake_driver:drive_main",
    "sweep": "hexapod_control.scale.sweep:main",
    "tune": "hexapod_control.scale.tune:main",
    "evaluate-many": "hexapod_control.scale.evaluate:main",
}
# Verbs that are ROS nodes: their arguments are ROS arguments (--ros-args -p name:=value), which
# argparse does not describe, so their --help is the module's documentation.
NODE_VERBS = frozenset({
    "robot-stack", "fake-driver", "drive", "simulator-node", "controller-node", "trajectory-node", "fk-node",
    "description-joint-states", "inverse-dynamics",
})
ALIAS_PREFIX = "hexapod_"


def alias_of(verb: str) -> str:
    """The executable that is the same as ``verb`` (``main-job`` -> ``hexapod_main_job``)."""
    return ALIAS_PREFIX + verb.replace("-", "_")


def module_source(module: str) -> Path:
    """The source file of a module of this package, found without importing it."""
    relative = Path(*module.split(".")[1:])
    package_init = PACKAGE_DIR / relative / "__init__.py"
    return package_init if package_init.is_file() else (PACKAGE_DIR / relative).with_suffix(".py")


def module_tree(module: str) -> ast.Module:
    return ast.parse(module_source(module).read_text(encoding="utf-8"))


def module_docstring(module: str) -> str:
    """The docstring of a module of this package, read from its source."""
    return ast.get_docstring(module_tree(module)) or ""


def function_docstring(module: str, function: str) -> str:
    """The docstring of a module's top-level function, read from its source."""
    for node in module_tree(module).body:
        if isinstance(node, ast.FunctionDef) and node.name == function:
            return ast.get_docstring(node) or ""
    return ""


def summary(verb: str) -> str:
    """The first line of the verb function's docstring, or else of its module's.

    A module that serves two verbs (``fake-driver`` and ``drive``) tells them apart by the
    docstrings of their functions.
    """
    module, function = VERBS[verb].split(":")
    text = function_docstring(module, function) or module_docstring(module)
    lines = text.strip().splitlines()
    return lines[0].replace("``", "") if lines else ""


def usage() -> str:
    width = max(map(len, VERBS))
    lines = [
        f"usage: {PROG} <verb> [arguments]   ({PROG} <verb> --help for the verb's own options)",
        "",
        __doc__.strip().splitlines()[0],
        "",
        "verbs:",
    ]
    lines += [f"  {verb:<{width}}  {summary(verb)}" for verb in VERBS]
    lines += ["", f"Each verb is also an executable of its own: {alias_of('evaluate')} is {PROG} evaluate."]
    return "\n".join(lines)


def resolve(verb: str):
    """The function that runs ``verb`` (imports its module)."""
    module, function = VERBS[verb].split(":")
    return getattr(importlib.import_module(module), function)


def main(argv: Sequence[str] | None = None) -> int:
    arguments = list(sys.argv[1:] if argv is None else argv)
    if not arguments or arguments[0] in ("-h", "--help"):
        print(usage())
        return 0 if arguments else 2
    verb, rest = arguments[0], arguments[1:]
    if verb not in VERBS:
        print(f"{PROG}: unknown verb {verb!r}; one of: {', '.join(VERBS)}", file=sys.stderr)
        return 2
    before_ros_arguments = rest[: rest.index("--ros-args")] if "--ros-args" in rest else rest
    if verb in NODE_VERBS and any(flag in before_ros_arguments for flag in ("-h", "--help")):
        module, function = VERBS[verb].split(":")
        print(f"usage: {PROG} {verb} [--ros-args -p NAME:=VALUE ...]   (alias: {alias_of(verb)})\n")
        own = function_docstring(module, function)
        print(f"{own}\n\n{module_docstring(module)}" if own else module_docstring(module))
        return 0
    result = resolve(verb)(rest)
    return int(result or 0)


if __name__ == "__main__":
    sys.exit(main())
