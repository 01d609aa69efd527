"""ament_python build of hexapod_control (also a plain setuptools package).

Building the package (``pip install``, ``colcon build``, ``python setup.py build_ext --inplace``)
compiles the generated C (dynamics terms and control cycles) into one shared library inside the
package, which hexapod_control/model/compiled.py loads with ctypes; compiling at first use stays
only as the developer fallback.
"""

import os
import runpy
from glob import glob

from setuptools import Extension, find_packages, setup
from setuptools.command.build_ext import build_ext

PACKAGE_NAME = "hexapod_control"
HERE = os.path.dirname(os.path.abspath(__file__))
GENERATED = os.path.join(PACKAGE_NAME, "model", "generated")
# Sources, flags and digest rule shared with compiled.py; read by path, as the package cannot be
# imported while it is being built.
NATIVE = runpy.run_path(os.path.join(HERE, PACKAGE_NAME, "model", "native_build.py"))


def native_library() -> Extension:
    """The generated C as one shared library, tagged with the digest of the sources it is built from."""
    sources = [os.path.join(GENERATED, name) for name in NATIVE["SOURCES"]]
    texts = []
    for path in sources:
        with open(os.path.join(HERE, path), "rb") as source:
            texts.append(source.read())
    digest = NATIVE["digest_definition"](NATIVE["source_digest"](texts))
    name = ".".join([PACKAGE_NAME, "model", "generated", os.path.splitext(NATIVE["LIBRARY_NAME"])[0]])
    return Extension(
        name,
        sources=sources,
        define_macros=[(NATIVE["DIGEST_MACRO"], digest)],
        extra_compile_args=list(NATIVE["COMPILE_FLAGS"]),
        libraries=list(NATIVE["LIBRARIES"]),
    )


class BuildNativeLibrary(build_ext):
    """build_ext for a plain C library loaded with ctypes: no Python module init, a fixed file name."""

    def get_ext_filename(self, fullname):
        return os.path.join(*fullname.split(".")[:-1], NATIVE["LIBRARY_NAME"])

    def get_export_symbols(self, ext):
        return []


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
    "hexapod_drive = hexapod_control.ros.fake_driver:drive_main",
    "hexapod_robot_stack = hexapod_control.ros.robot_stack:main",
    "hexapod_sim_stack = hexapod_control.ros.stack:main",
    "hexapod_gazebo_description = hexapod_control.simulation.gazebo_description:main",
    "hexapod_record = hexapod_control.ros.recorder_node:main",
    "hexapod_evaluate = hexapod_control.evaluation.cli:main",
    "hexapod_identify = hexapod_control.identification.cli:main",
    "hexapod_inverse_dynamics = hexapod_control.ros.inverse_dynamics_node:main",
    "hexapod_replay = hexapod_control.evaluation.replay:main",
    "hexapod_margins = hexapod_control.control.margins:main",
    "hexapod_sweep = hexapod_control.scale.sweep:main",
    "hexapod_tune = hexapod_control.scale.tune:main",
    "hexapod_evaluate_many = hexapod_control.scale.evaluate:main",
    "hexapod = hexapod_control.command:main",  # every executable above as a verb: hexapod --help
]

setup(
    name=PACKAGE_NAME,
    version="0.1.0",
    packages=find_packages(exclude=["test", "test.*"]),
    # The generated C (the fallback compiles it) and the rcl loops of the robot stack and the fake
    # driver, compiled at first use against the rcl they run with (ros/native_loop.py).
    package_data={PACKAGE_NAME: ["model/generated/*.c", "ros/rcl_loop.c", "ros/driver_loop.c"]},
    ext_modules=[native_library()],
    cmdclass={"build_ext": BuildNativeLibrary},
    data_files=[
        ("share/ament_index/resource_index/packages", ["resource/" + PACKAGE_NAME]),
        ("share/" + PACKAGE_NAME, ["package.xml"]),
        *share_files("launch"),
        *share_files("config"),
    ],
    install_requires=["setuptools"],
    zip_safe=False,  # a shared library is loaded from a file
    maintainer="hexapod_control maintainers",
    maintainer_email="hexapod_control@example.com",
    description="Control of the Quanser Hexapod parallel robot (ROS 2, rclpy).",
    license="Apache-2.0",
    tests_require=["pytest"],
    entry_points={
        "console_scripts": CONSOLE_SCRIPTS,
    },
)
