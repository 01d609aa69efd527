"""The lock file: it pins everything requirements-dev.txt names, within each requirement's range."""

import importlib.util
import sys
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

REPO = Path(__file__).resolve().parent.parent
spec = importlib.util.spec_from_file_location("refresh_constraints", REPO / "scripts" / "refresh_constraints.py")
refresh = importlib.util.module_from_spec(spec)
spec.loader.exec_module(refresh)


def locked() -> dict[str, str]:
    pins = {}
    for line in (REPO / "constraints.txt").read_text(encoding="utf-8").splitlines():
        if line and not line.startswith("#"):
            name, version = line.split("==")
            pins[canonicalize_name(name)] = version
    return pins


def test_every_requirement_is_pinned_within_its_range():
    pins = locked()
    for line in refresh.requirement_lines(refresh.REQUIREMENTS):
        requirement = Requirement(line)
        name = canonicalize_name(requirement.name)
        assert name in pins, f"{requirement.name} is not in constraints.txt"
        assert requirement.specifier.contains(pins[name], prereleases=True), f"{requirement} vs {pins[name]}"


def test_the_closure_follows_dependencies_and_pins_the_installed_versions():
    pinned = refresh.pinned_closure([Requirement("pytest")])
    assert pinned["pytest"] == pytest.__version__
    assert "pluggy" in pinned and "iniconfig" in pinned  # pytest's own dependencies
    assert "sympy" not in pinned  # nothing that pytest does not need


def test_an_installed_version_outside_the_requirement_stops_the_refresh():
    with pytest.raises(SystemExit) as stopped:
        refresh.pinned_closure([Requirement(f"pytest!={pytest.__version__}")])
    assert "run scripts/bootstrap.sh" in str(stopped.value)


def test_an_environment_marker_that_does_not_apply_is_skipped():
    assert refresh.pinned_closure([Requirement(f'no-such-package ; python_version < "{sys.version_info[0]}"')]) == {}
