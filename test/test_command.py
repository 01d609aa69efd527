"""The ``hexapod`` command: every verb listed, --help light, each old executable an alias of its verb."""

import ast
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hexapod_control import command

REPO = Path(__file__).resolve().parent.parent
# Modules whose import `hexapod --help` must not pay for.
HEAVY = ("numpy", "scipy", "rclpy", "pydantic", "yaml", "matplotlib", "mujoco", "sympy")


def console_scripts() -> dict[str, str]:
    """name -> "module:function" of setup.py's CONSOLE_SCRIPTS, read without running setup.py."""
    tree = ast.parse((REPO / "setup.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) == "CONSOLE_SCRIPTS":
            entries = ast.literal_eval(node.value)
            return dict((part.strip() for part in entry.split("=")) for entry in entries)
    raise AssertionError("setup.py declares no CONSOLE_SCRIPTS")


def run_python(code: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)


def test_help_lists_every_verb_and_loads_nothing_heavy():
    result = run_python(
        "import sys, json\n"
        "from hexapod_control.command import main\n"
        "code = main(['--help'])\n"
        f"print(json.dumps([code, sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY!r})]))\n"
    )
    assert result.returncode == 0, result.stderr
    *listing, last = result.stdout.strip().splitlines()
    code, heavy = json.loads(last)
    assert code == 0
    assert heavy == []
    listed = {line.split()[0] for line in listing if line.startswith("  ")}
    assert listed == set(command.VERBS)


def test_every_verb_has_a_one_line_summary_from_its_docstring():
    for verb in command.VERBS:
        assert command.summary(verb), verb


def test_every_executable_is_an_alias_of_its_verb():
    scripts = console_scripts()
    aliases = {name: target for name, target in scripts.items() if name != command.PROG}
    assert scripts[command.PROG] == "hexapod_control.command:main"
    assert {command.alias_of(verb) for verb in command.VERBS} == set(aliases)
    for verb, target in command.VERBS.items():
        assert aliases[command.alias_of(verb)] == target, verb


@pytest.mark.parametrize("verb", sorted(command.VERBS))
def test_each_verb_names_a_function_that_exists(verb):
    module, function = command.VERBS[verb].split(":")
    source = command.module_source(module)
    assert source.is_file(), source
    defined = {node.name for node in ast.parse(source.read_text()).body if isinstance(node, ast.FunctionDef)}
    assert function in defined
    if verb not in command.NODE_VERBS or importlib.util.find_spec("rclpy") is not None:
        assert callable(command.resolve(verb))


def test_a_verb_runs_with_its_arguments(capsys):
    with pytest.raises(SystemExit) as exit_info:
        command.main(["margins", "--help"])
    assert exit_info.value.code == 0
    assert "--params FILE" in capsys.readouterr().out


def test_a_node_verb_help_is_its_documentation_and_starts_nothing(capsys):
    assert command.main(["fake-driver", "--help"]) == 0
    out = capsys.readouterr().out
    assert "hexapod_fake_driver" in out
    assert command.module_docstring("hexapod_control.ros.fake_driver").splitlines()[0] in out


def test_a_verb_sharing_its_module_leads_its_help_with_its_own_summary(capsys):
    assert command.main(["drive", "--help"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[2] == command.summary("drive") != command.summary("fake-driver")
    assert command.module_docstring("hexapod_control.ros.fake_driver").splitlines()[0] in out


def test_an_unknown_verb_is_refused_naming_the_verbs(capsys):
    assert command.main(["evalute"]) == 2
    err = capsys.readouterr().err
    assert "evalute" in err and "evaluate" in err
    assert command.main([]) == 2


@pytest.mark.slow
def test_the_shared_options_are_declared_once():
    """--params, --topic and -o are declared by hexapod_control.options, not by each command."""
    declared = {}
    for path in sorted((REPO / "hexapod_control").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "add_argument":
                flags = {arg.value for arg in node.args if isinstance(arg, ast.Constant)}
                for flag in flags & {"--params", "--topic", "-o"}:
                    declared.setdefault(flag, set()).add(path.relative_to(REPO).as_posix())
    # evaluation/cli.py keeps its own declarations until its rewrite lands.
    allowed = {"hexapod_control/options.py", "hexapod_control/evaluation/cli.py"}
    assert all(paths <= allowed for paths in declared.values()), declared


@pytest.mark.parametrize("verb", sorted(command.VERBS))
def test_every_verb_answers_help(verb, capsys):
    """--help of every verb builds its parser: options that two layers both declare fail here."""
    try:
        code = command.main([verb, "--help"])
    except SystemExit as stop:
        code = stop.code
    assert code == 0, capsys.readouterr().err
    assert capsys.readouterr().out.strip()
