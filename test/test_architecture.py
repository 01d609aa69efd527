"""The package's structure: layers that import downwards only, a ROS-free core, no import cycles,
the public API at the root."""

import ast
import importlib
import inspect
import os
import subprocess
import sys
from pathlib import Path

import pytest

import hexapod_control

PACKAGE_DIR = Path(hexapod_control.__file__).resolve().parent
REPO_ROOT = PACKAGE_DIR.parent
ROS_PACKAGE = "hexapod_control.ros"
# The layers, lowest first: a module imports from its own layer and those below it, never from
# one above (function-level imports count too). A unit is a subpackage or a module at the root;
# "" is the root package, which re-exports the public API. Only ros/ imports ROS.
LAYERS = (
    ("errors", "options", "lazy_exports"),  # the error tree; the command-line option groups; re-exports
    ("model",),  # parameters schema, kinematics, dynamics, generated code
    ("conventions", "codegen", "bags"),  # topics and message fields in numbers; code generation; bag storage
    ("control",),  # trajectories, controllers, delay compensation, safety, the control loop
    ("simulation",),  # plants, loop delay, the lockstep loop and its recording
    ("drive",),  # the drive side: the drive core and its boards
    ("evaluation",),  # bags to metrics, reports and replays
    ("identification", "scale"),  # drives from bags; sweeps and tuning
    ("ros",),  # the rclpy nodes
    ("main_job", "command", "docs_gen", "__main__", ""),  # commands over everything
)


def module_name(path: Path) -> str:
    parts = path.relative_to(REPO_ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def package_modules() -> dict[str, Path]:
    return {module_name(path): path for path in sorted(PACKAGE_DIR.rglob("*.py"))}


def ros_free_modules() -> list[str]:
    """Every module below the ros layer, and ros/__init__ (a docstring)."""
    return sorted(name for name in package_modules() if not name.startswith(ROS_PACKAGE + ".") and not name.endswith(".__main__"))


def test_every_non_ros_module_imports_with_rclpy_and_the_messages_blocked():
    """A lab uses the model, control, simulation, bags and evaluation from a notebook without ROS."""
    blocked = ["rclpy", "sensor_msgs", "geometry_msgs", "std_msgs", "trajectory_msgs", "diagnostic_msgs",
               "std_srvs", "rosgraph_msgs", "rcl_interfaces", "builtin_interfaces", "launch", "launch_ros"]
    modules = ros_free_modules()
    script = f"""
import importlib, importlib.abc, sys
BLOCKED = {blocked!r}
class Blocker(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ImportError("ROS module " + name + " imported by the ROS-free core")
sys.meta_path.insert(0, Blocker())
for module in {modules!r}:
    importlib.import_module(module)
loaded = sorted(m for m in sys.modules if m.split(".")[0] in BLOCKED)
assert not loaded, loaded
print(len({modules!r}))
"""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")])))
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    assert int(result.stdout.split()[-1]) == len(modules) > 30


def imports_of(name: str, path: Path, modules: set[str]) -> set[str]:
    """The package modules that ``name`` imports at module level or inside functions."""
    tree = ast.parse(path.read_text(), str(path))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else []))
            targets = [base] + [f"{base}.{alias.name}" for alias in node.names]
        else:
            continue
        for target in targets:
            # `from package import module` names a module; `from module import name` the module itself.
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for neighbour in sorted(graph[node]):
            if state.get(neighbour) == 1:
                return stack[stack.index(neighbour):] + [neighbour]
            if neighbour not in state:
                cycle = visit(neighbour)
                if cycle:
                    return cycle
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            cycle = visit(node)
            if cycle:
                return cycle
    return None


def import_graph() -> dict[str, set[str]]:
    modules = package_modules()
    names = set(modules)
    graph = {name: imports_of(name, path, names) for name, path in modules.items()}
    # A package's __init__ re-exporting its children is not a dependency of the children on it.
    for name in graph:
        graph[name] = {target for target in graph[name] if not name.startswith(target + ".")}
    return graph


def test_the_package_has_no_import_cycles():
    """Kinematics, assembly modes, dynamics, control, ... depend downwards only (function-level imports too)."""
    cycle = find_cycle(import_graph())
    assert cycle is None, " -> ".join(cycle)


def test_the_cycle_finder_finds_a_planted_cycle():
    graph = import_graph()
    graph["hexapod_control.model.kinematics"] = graph["hexapod_control.model.kinematics"] | {"hexapod_control.model.hexapod"}
    cycle = find_cycle(graph)
    assert cycle is not None and "hexapod_control.model.kinematics" in cycle


def layer_of(module: str) -> int:
    """The index in LAYERS of a package module's unit (KeyError for a unit no layer names)."""
    unit = module.split(".")[1] if "." in module else ""
    return next(index for index, units in enumerate(LAYERS) if unit in units)


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    return sorted(f"{name} -> {target}" for name, targets in graph.items() for target in targets
                  if layer_of(target) > layer_of(name))


def test_every_unit_of_the_package_has_a_layer():
    units = {name.split(".")[1] if "." in name else "" for name in package_modules()}
    named = {unit for layer in LAYERS for unit in layer}
    assert units == named, f"without a layer: {sorted(units - named)}; no such unit: {sorted(named - units)}"


def test_every_import_goes_down_the_layers():
    upward = upward_imports(import_graph())
    assert not upward, "upward imports (LAYERS): " + "; ".join(upward)


def test_a_planted_upward_import_is_found():
    graph = import_graph()
    graph["hexapod_control.model.kinematics"] = graph["hexapod_control.model.kinematics"] | {"hexapod_control.control.loop"}
    assert upward_imports(graph) == ["hexapod_control.model.kinematics -> hexapod_control.control.loop"]


@pytest.mark.parametrize("name", hexapod_control.__all__)
def test_the_public_api_is_importable_from_the_package_root(name):
    assert getattr(hexapod_control, name) is not None


EXPORTING_PACKAGES = ("hexapod_control", "hexapod_control.model", "hexapod_control.control", "hexapod_control.simulation",
                      "hexapod_control.evaluation", "hexapod_control.drive", "hexapod_control.scale",
                      "hexapod_control.identification", "hexapod_control.bags")


@pytest.mark.parametrize("package", EXPORTING_PACKAGES)
def test_every_package_exports_its_public_names_from_where_they_are_defined(package):
    """Each name of a package's __all__ imports from it, and a class or function is the one its
    defining module holds (not a copy, not a name imported there from elsewhere)."""
    module = importlib.import_module(package)
    assert module.__all__ and len(set(module.__all__)) == len(module.__all__)
    for name in module.__all__:
        value = getattr(module, name)
        defined_in = next((source for source, names in getattr(module, "_EXPORTS", {}).items() if name in names), None)
        if defined_in is not None:
            assert value is getattr(importlib.import_module(defined_in), name)
            if inspect.isclass(value) or inspect.isfunction(value):
                assert value.__module__ == defined_in, f"{package}.{name} is defined in {value.__module__}"
    assert set(dir(module)) >= set(module.__all__)


def test_the_public_api_covers_what_a_notebook_needs():
    needed = {"HexapodModel", "KinematicState", "load_parameters", "HexapodParameters", "make_controller",
              "make_trajectory", "make_plant", "SafetySupervisor", "ControlLoop", "LockstepLoop", "HexapodError"}
    assert needed <= set(hexapod_control.__all__)


ENGINE_PACKAGE = "hexapod_control.scale"  # sweeps, tuning and bag archives: the only users of Ray
ENGINE_LIBRARIES = ("ray", "optuna", "pyarrow")


def test_ray_optuna_and_pyarrow_are_imported_only_inside_the_scale_commands():
    """Every module, the scale package's too, imports without them: they are imported where a command needs them."""
    script = f"""
import importlib, importlib.abc, sys
BLOCKED = {ENGINE_LIBRARIES!r}
class Blocker(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ImportError(name + " imported at module level")
sys.meta_path.insert(0, Blocker())
for module in {ros_free_modules()!r}:
    importlib.import_module(module)
print(sorted(m for m in sys.modules if m.split(".")[0] in BLOCKED))
"""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")])))
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.split()[-1] == "[]"


def test_only_the_scale_package_names_ray_and_nothing_else_depends_on_it():
    graph = import_graph()
    users = {name for name, targets in graph.items() if any(t.startswith(ENGINE_PACKAGE) for t in targets)}
    assert users <= {name for name in graph if name.startswith(ENGINE_PACKAGE)}, sorted(users)
    naming = set()
    for name, path in package_modules().items():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                targets = [node.module or ""]
            else:
                continue
            if any(target.split(".")[0] in ENGINE_LIBRARIES for target in targets):
                naming.add(name)
    assert naming and all(name.startswith(ENGINE_PACKAGE + ".") for name in naming), sorted(naming)
