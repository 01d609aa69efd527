"""The launch files' check for optional packages: an installed package is found, a missing one named."""

import pytest

pytest.importorskip("ament_index_python")

from hexapod_control.ros.launch_support import missing_packages  # noqa: E402

ABSENT = "hexapod_control_no_such_package"


def test_an_installed_package_is_not_missing_and_an_absent_one_is():
    # rclpy registers itself in the ament index wherever it is installed (a workspace or the wheels).
    assert missing_packages(["rclpy", ABSENT, "rclpy"]) == [ABSENT]


def test_nothing_asked_nothing_missing():
    assert missing_packages([]) == []
