"""The test tiers: every test gets one tier from what it uses, so `pytest -m unit` runs no middleware."""

from pathlib import Path
from types import SimpleNamespace

import conftest


def item(file: str, name: str, fixtures=(), generated=False, marks=()):
    function = SimpleNamespace(is_hypothesis_test=True) if generated else SimpleNamespace()
    return SimpleNamespace(path=Path("test") / file, name=name, fixturenames=list(fixtures), obj=function,
                           get_closest_marker=lambda mark: mark if mark in marks else None)


def test_a_test_with_an_rclpy_context_is_dds_whatever_its_file():
    assert conftest.tiers_of(item("test_anything.py", "test_x", fixtures=["executor", "context"])) == ["dds"]


def test_a_listed_test_is_dds_with_every_parametrisation_and_its_neighbours_are_not():
    listed_file, listed_test = conftest.DDS[1].split("::")
    assert "dds" in conftest.tiers_of(item(listed_file, listed_test + "[computed_torque]"))
    assert "dds" not in conftest.tiers_of(item(listed_file, listed_test + "_and_more"))


def test_launch_testing_files_are_the_launch_tier():
    assert conftest.tiers_of(item(conftest.LAUNCH[0], "test_x")) == ["launch"]


def test_a_property_test_is_slow_not_unit_and_a_plain_one_is_unit():
    assert conftest.tiers_of(item("test_kinematics.py", "test_x", generated=True)) == ["slow"]
    assert conftest.tiers_of(item("test_kinematics.py", "test_x", fixtures=["context"], generated=True)) == ["dds", "slow"]
    assert conftest.tiers_of(item("test_kinematics.py", "test_x")) == ["unit"]


def test_a_test_marked_slow_or_in_a_slow_file_leaves_the_unit_tier_and_keeps_dds():
    assert conftest.tiers_of(item("test_kinematics.py", "test_x", marks=["slow"])) == ["slow"]
    assert conftest.tiers_of(item("test_kinematics.py", "test_x", fixtures=["context"], marks=["slow"])) == ["dds", "slow"]
    assert conftest.tiers_of(item(conftest.SLOW[0], "test_x")) == ["slow"]


def test_every_tier_is_a_registered_marker():
    setup_cfg = (Path(__file__).resolve().parent.parent / "setup.cfg").read_text()
    markers = setup_cfg.split("markers =", 1)[1]
    assert all(f"\n    {tier}:" in markers for tier in conftest.TIERS)
