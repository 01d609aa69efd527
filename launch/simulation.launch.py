"""Simulated Hexapod: simulator + forward kinematics + trajectory + controller, one process each.

    ros2 launch hexapod_control simulation.launch.py backend:=mujoco controller:=double_loop
    (backend:=dart: the Gazebo description in DART, Gazebo Sim's physics engine; needs dartpy)

The simulator publishes /clock and steps in lockstep with the controller (it advances one plant
step per force command), so the other nodes run on sim time (``use_sim_time:=true``, the default)
however slow the simulation is. ``use_sim_time:=false`` only makes sense with
``stepping:=realtime`` on a machine that keeps up with the plant rate: the watchdog would otherwise
see a slow simulation as stale joint states. The controller arms itself at the first joint state and
the trajectory starts at once from home, where the plant starts. Across processes the order in which
the controller receives the reference and the joint state of one instant is up to DDS; for
bit-for-bit repeatable runs use the one-process stack (``hexapod_sim_stack``).
visualization.launch.py publishes the TF of all 25 bodies; ``rviz:=true`` also starts RViz.
"""

import os

from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, IncludeLaunchDescription
from launch.conditions import IfCondition
from launch.launch_description_sources import PythonLaunchDescriptionSource
from launch.substitutions import LaunchConfiguration, PathJoinSubstitution
from launch_ros.actions import Node
from launch_ros.parameter_descriptions import ParameterValue
from launch_ros.substitutions import FindPackageShare

from hexapod_control.control.controllers import CONTROLLER_NAMES
from hexapod_control.control.trajectory_player import TRAJECTORY_CHOICES
from hexapod_control.simulation import BACKENDS

PACKAGE = "hexapod_control"
# robot_state_publisher with the full joint state, and RViz: next to this file, installed or not.
VISUALIZATION = os.path.join(os.path.dirname(os.path.abspath(__file__)), "visualization.launch.py")


def generate_launch_description():
    params_file = LaunchConfiguration("params_file")
    use_sim_time = ParameterValue(LaunchConfiguration("use_sim_time"), value_type=bool)
    common = {"params_file": ParameterValue(params_file, value_type=str)}

    arguments = [
        DeclareLaunchArgument("backend", default_value="embedded", choices=list(BACKENDS),
                              description="simulated plant: the reduced model, the MuJoCo multibody model, or the "
                                          "Gazebo description in DART (needs dartpy)"),
        DeclareLaunchArgument("controller", default_value="computed_torque", choices=list(CONTROLLER_NAMES),
                              description="control law of the controller node"),
        DeclareLaunchArgument("trajectory", default_value="operational_space", choices=list(TRAJECTORY_CHOICES),
                              description="reference trajectory (thesis 6.5, thesis 6.82, the identification run, or hold)"),
        DeclareLaunchArgument("use_sim_time", default_value="true", choices=["true", "false"],
                              description="run the nodes on the simulator's /clock"),
        DeclareLaunchArgument("stepping", default_value="lockstep", choices=["lockstep", "realtime"],
                              description="simulator: one step per force command, or a wall-clock timer"),
        DeclareLaunchArgument("params_file",
                              default_value=PathJoinSubstitution([FindPackageShare(PACKAGE), "config", "hexapod.yaml"]),
                              description="YAML parameters of the robot (geometry, gains, limits, safety)"),
        DeclareLaunchArgument("with_trajectory", default_value="true", choices=["true", "false"],
                              description="start the trajectory node (false: publish /hexapod/reference yourself)"),
        DeclareLaunchArgument("rviz", default_value="false", choices=["true", "false"],
                              description="start RViz (TF of the 25 bodies is published either way)"),
        DeclareLaunchArgument("inverse_dynamics", default_value="false", choices=["true", "false"],
                              description="start the inverse-dynamics node (predicted forces, residual, feed-forward)"),
    ]
    nodes = [
        Node(
            package=PACKAGE, executable="hexapod_simulator_node", name="hexapod_simulator", output="screen",
            # The simulator is the source of /clock: it never runs on sim time itself.
            parameters=[common, {"backend": LaunchConfiguration("backend"), "stepping": LaunchConfiguration("stepping"),
                                 "use_sim_time": False}],
        ),
        Node(
            package=PACKAGE, executable="hexapod_fk_node", name="hexapod_forward_kinematics", output="screen",
            parameters=[common, {"use_sim_time": use_sim_time}],
        ),
        Node(
            package=PACKAGE, executable="hexapod_trajectory_node", name="hexapod_trajectory", output="screen",
            condition=IfCondition(LaunchConfiguration("with_trajectory")),
            parameters=[common, {"trajectory": LaunchConfiguration("trajectory"), "autostart": True,
                                 "use_sim_time": use_sim_time}],
        ),
        Node(
            package=PACKAGE, executable="hexapod_controller_node", name="hexapod_controller", output="screen",
            # The simulated plants are the rigid-body model, without the drives' rotor inertia:
            # they need the "simulated_plant" gains of the double loop (see controllers.py).
            parameters=[common, {"controller": LaunchConfiguration("controller"), "gain_set": "simulated_plant",
                                 "arm_on_start": True, "use_sim_time": use_sim_time}],
        ),
        Node(
            package=PACKAGE, executable="hexapod_inverse_dynamics", name="hexapod_inverse_dynamics", output="screen",
            condition=IfCondition(LaunchConfiguration("inverse_dynamics")),
            parameters=[common, {"use_sim_time": use_sim_time}],
        ),
    ]
    visualization = IncludeLaunchDescription(
        PythonLaunchDescriptionSource(VISUALIZATION),
        launch_arguments={"params_file": LaunchConfiguration("params_file"),
                          "use_sim_time": LaunchConfiguration("use_sim_time"),
                          "rviz": LaunchConfiguration("rviz")}.items(),
    )
    return LaunchDescription(arguments + nodes + [visualization])
