"""ament_python build of hexapod_control (also a plain setuptools package)."""

import os
from glob import glob

from setuptools import find_packages, setup

PACKAGE_NAME = "hexapod_control"
HERE = os.path.dirname(os.path.abspath(__file__))


def share_files(folder):
    """(install dir, files) for every regular file directly in `folder`.

    An absent or empty folder yields nothing, so `launch/` may stay empty until launch files exist.
    The paths are made relative to setup.py, as data_files wants, whatever the working directory.
    """
    files = sorted(
        os.path.relpath(path, HERE)
        for path in glob(os.path.join(HERE, folder, "*"))
        if os.path.isfile(path)
    )
    return [(os.path.join("share", PACKAGE_NAME, folder), files)] if files else []


# One line per executable: `ros2 run hexapod_control <name>`.
CONSOLE_SCRIPTS = [
    "hexapod_main_job = hexapod_control.main_job:main",
    "hexapod_fk_node = hexapod_control.ros.fk_node:main",
    "hexapod_description_joint_states = hexapod_control.ros.description_joint_state_node:main",
    "hexapod_trajectory_node = hexapod_control.ros.trajectory_node:main",
    "hexapod_controller_node = hexapod_control.ros.controller_node:main",
    "hexapod_simulator_node = hexapod_control.ros.simulator_node:main",
    "hexapod_fake_driver = hexapod_control.ros.fake_driver:main",
    "hexapod_sim_stack = hexapod_control.ros.stack:main",
    "hexapod_gazebo_description = hexapod_control.simulation.gazebo_description:main",
    "hexapod_record = hexapod_control.ros.recorder_node:main",
    "hexapod_evaluate = hexapod_control.evaluation.cli:main",
    "hexapod_replay = hexapod_control.evaluation.replay:main",
]

setup(
    name=PACKAGE_NAME,
    version="0.1.0",
    packages=find_packages(exclude=["test", "test.*"]),
    package_data={PACKAGE_NAME: ["model/generated/*.c"]},  # the C twin of the generated dynamics
    data_files=[
        ("share/ament_index/resource_index/packages", ["resource/" + PACKAGE_NAME]),
        ("share/" + PACKAGE_NAME, ["package.xml"]),
        *share_files("launch"),
        *share_files("config"),
    ],
    install_requires=["setuptools"],
    zip_safe=True,
    maintainer="hexapod_control maintainers",
    maintainer_email="hexapod_control@example.com",
    description="Control of the Quanser Hexapod parallel robot (ROS 2, rclpy).",
    license="Apache-2.0",
    tests_require=["pytest"],
    entry_points={
        "console_scripts": CONSOLE_SCRIPTS,
    },
)
