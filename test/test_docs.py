"""The documentation: it builds with warnings as errors, its generated parameters reference matches
the schema, every link and every file it names exists, and no file points outside the repository."""

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

from hexapod_control import command, docs_gen
from hexapod_control.model.parameters import default_parameters_path, load_parameters

REPO = Path(__file__).resolve().parent.parent
DOC = REPO / "doc"
# Markdown links [text](target); the target up to a space or the closing parenthesis.
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
# A repository path named in code: `folder/.../name.ext` or `folder/`, under a top-level folder.
TOP_FOLDERS = ("config", "hexapod_control", "launch", "scripts", "test", "benchmarks", "examples", "doc", "resource")
NAMED_PATH = re.compile(r"`((?:%s)/[\w./-]*)`" % "|".join(TOP_FOLDERS))
# Places outside the repository that a document must not send a reader to. Built from pieces so
# that this file does not name them itself.
OUTSIDE = [re.compile(pattern) for pattern in (
    r"\.\./" + "shared", "/" + "work/", "HEXAPOD" + "_MODEL", "QUANSER" + "_DRIVE", r"seeds/\d{3}_",
)]


def markdown_files() -> list[Path]:
    return sorted([*REPO.glob("*.md"), *DOC.glob("*.md")])


# Folders a source tree may hold that are not the repository's files (a venv, builds, caches).
NOT_SOURCES = {".git", ".venv", "build", "install", "log", "_build", "__pycache__", ".pytest_cache", ".ruff_cache",
               ".hypothesis", ".ros_log", "runs"}


def repository_text_files() -> list[Path]:
    """The repository's files: git's list in a checkout, else (an exported tree, as colcon's) a walk."""
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=REPO, capture_output=True,
                            text=True)
    if listed.returncode == 0:
        names = [REPO / name for name in listed.stdout.splitlines()]
    else:
        names = [path for path in REPO.rglob("*") if not NOT_SOURCES & set(path.relative_to(REPO).parts)]
    binary = {".png", ".svg", ".so", ".npz", ".mcap", ".db3", ".pyc"}
    return [path for path in names if path.is_file() and path.suffix not in binary]


@pytest.mark.slow
def test_the_docs_build_with_warnings_as_errors(tmp_path):
    pytest.importorskip("sphinx")
    pytest.importorskip("myst_parser")
    result = subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html", str(DOC), str(tmp_path / "html")],
        capture_output=True, text=True, timeout=600, cwd=REPO,
    )
    assert result.returncode == 0, result.stderr[-5000:]
    assert (tmp_path / "html" / "parameters.html").is_file()


def test_the_parameters_reference_is_what_the_schema_generates():
    expected = docs_gen.render(load_parameters(default_parameters_path(docs_gen.SHIPPED_FILE)))
    assert (DOC / "parameters.md").read_text(encoding="utf-8") == expected, (
        "doc/parameters.md is stale: run python -m hexapod_control.docs_gen")


@pytest.mark.parametrize("file", [docs_gen.SHIPPED_FILE, *docs_gen.OPTIONAL_SECTION_EXAMPLES.values()])
def test_the_parameters_reference_names_every_key_of_the_shipped_and_example_files(file):
    parameters = load_parameters(default_parameters_path(file))
    page = (DOC / "parameters.md").read_text(encoding="utf-8")
    headings = set(re.findall(r"^## (\S+)$", page, re.M))

    def leaves(mapping: dict, path: str):
        for key, value in mapping.items():
            if isinstance(value, dict):
                assert f"{path}.{key}" in headings, f"{path}.{key}"
                yield from leaves(value, f"{path}.{key}")
            else:
                yield path, key

    for section, key in leaves(parameters.model_dump(), docs_gen.ROOT_KEY):
        body = page.split(f"## {section}\n", 1)[1].split("\n## ", 1)[0]
        assert f"| `{key}` |" in body, f"{section}.{key}"


def test_the_generator_check_mode_detects_a_stale_page(tmp_path):
    stale = tmp_path / "parameters.md"
    stale.write_text("# Parameters reference\n", encoding="utf-8")
    assert docs_gen.main(["--output", str(stale), "--check"]) == 1
    assert docs_gen.main(["--output", str(stale)]) == 0
    assert docs_gen.main(["--output", str(stale), "--check"]) == 0


@pytest.mark.parametrize("page", markdown_files(), ids=lambda path: path.relative_to(REPO).as_posix())
def test_every_link_and_named_file_resolves(page):
    text = page.read_text(encoding="utf-8")
    missing = []
    for target in LINK.findall(text):
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue
        if not (page.parent / target.split("#")[0]).exists():
            missing.append(target)
    for named in NAMED_PATH.findall(text):
        if not (REPO / named.rstrip("/")).exists():
            missing.append(named)
    assert not missing, f"{page.relative_to(REPO)} names what does not exist: {missing}"


def test_the_link_check_finds_a_broken_link(tmp_path):
    assert LINK.findall("see [the model](model.md#errata) and [](nowhere.md)") == ["model.md#errata", "nowhere.md"]
    assert NAMED_PATH.findall("in `config/nothing.yaml` and `hexapod_control/`") == ["config/nothing.yaml",
                                                                                       "hexapod_control/"]


def test_no_file_names_a_path_outside_the_repository():
    found = []
    for path in repository_text_files():
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        found += [f"{path.relative_to(REPO)}: {pattern.pattern}" for pattern in OUTSIDE if pattern.search(text)]
    assert not found, found


def launch_arguments(path: Path) -> list[str]:
    """The names a launch file declares with DeclareLaunchArgument, read from its source."""
    names = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "DeclareLaunchArgument":
            names.append(node.args[0].value)
    return names


@pytest.mark.parametrize("launch_file", sorted((REPO / "launch").glob("*.launch.py")), ids=lambda path: path.name)
def test_the_launch_page_lists_every_argument_of_every_launch_file(launch_file):
    page = (DOC / "launch.md").read_text(encoding="utf-8")
    assert f"## {launch_file.name}\n" in page
    section = page.split(f"## {launch_file.name}\n", 1)[1].split("\n## ", 1)[0]
    declared = launch_arguments(launch_file)
    assert declared
    assert not [name for name in declared if f"| `{name}` |" not in section]


def test_the_commands_page_lists_every_verb():
    page = (DOC / "commands.md").read_text(encoding="utf-8")
    assert not [verb for verb in command.VERBS if f"| `{verb}` |" not in page]


def test_the_readme_quick_starts_come_within_its_first_screenful():
    lines = (REPO / "README.md").read_text(encoding="utf-8").splitlines()
    assert lines[0].startswith("# ")
    screen = "\n".join(lines[:50])
    first_commands = [line.split()[0] for line in lines if line.startswith("./scripts/")][:2]
    assert first_commands == ["./scripts/run_main_job.sh", "./scripts/run_tests.sh"]
    for use in ("hardware.launch.py", "gazebo.launch.py", "evaluate"):
        assert use in screen, use
