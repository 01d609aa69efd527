"""The launch files' check for optional packages (an installed package is found, a missing one named) and
their boolean arguments."""

import pytest

pytest.importorskip("ament_index_python")

from hexapod_control.ros.launch_support import missing_packages, parse_flag  # noqa: E402

ABSENT = "hexapod_control_no_such_package"


def test_an_installed_package_is_not_missing_and_an_absent_one_is():
    # rclpy registers itself in the ament index wherever it is installed (a workspace or the wheels).
    assert missing_packages(["rclpy", ABSENT, "rclpy"]) == [ABSENT]


def test_nothing_asked_nothing_missing():
    assert missing_packages([]) == []


@pytest.mark.parametrize("value, expected", [("true", True), ("False", False), (" TRUE ", True)])
def test_a_boolean_argument_takes_true_or_false_in_any_case(value, expected):
    assert parse_flag("gui", value) is expected


@pytest.mark.parametrize("value", ["1", "yes", "", "truee"])
def test_any_other_boolean_value_is_refused_naming_the_argument(value):
    with pytest.raises(ValueError, match="launch argument gui: expected true or false"):
        parse_flag("gui", value)
