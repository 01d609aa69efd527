"""TF of all 25 bodies of the Hexapod, and RViz: robot_state_publisher fed with the full joint state.

    ros2 launch hexapod_control visualization.launch.py rviz:=true [use_sim_time:=true]

simulation.launch.py and hardware.launch.py include it (their ``rviz`` argument is passed on); on its
own it shows any source of /joint_states, e.g. ``ros2 bag play <bag> --clock`` with
``use_sim_time:=true``. The description is generated from ``params_file`` (the plain URDF of
:mod:`hexapod_control.simulation.gazebo_description`, links and joints only); the joint state of
the robot names only the six sliders, so hexapod_description_joint_states adds every passive joint
from the forward kinematics and robot_state_publisher reads that topic instead of /joint_states.
"""

from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, LogInfo, OpaqueFunction
from launch.substitutions import LaunchConfiguration, PathJoinSubstitution
from launch_ros.actions import Node
from launch_ros.parameter_descriptions import ParameterValue
from launch_ros.substitutions import FindPackageShare

from hexapod_control.conventions import TOPICS
from hexapod_control.model.parameters import load_parameters
from hexapod_control.ros.launch_support import missing_packages, parse_flag
from hexapod_control.simulation import gazebo_description as gd

PACKAGE = "hexapod_control"
RVIZ_CONFIG = ("config", "hexapod.rviz")
STATE_PUBLISHER = "robot_state_publisher"
VIEWER = "rviz2"
# Optional packages: the launch argument that asks for each, and what is lost without it.
OPTIONAL = {STATE_PUBLISHER: ("robot_state_publisher", "no TF of the 25 bodies"), VIEWER: ("rviz", "no viewer")}


def _flag(context, name: str) -> bool:
    return parse_flag(name, LaunchConfiguration(name).perform(context))


def _setup(context, *args, **kwargs):
    params_file = LaunchConfiguration("params_file").perform(context)
    parameters = load_parameters(params_file)
    sim_time = {"use_sim_time": _flag(context, "use_sim_time")}
    full_joint_states = TOPICS["description_joint_states"]
    actions = [
        Node(
            package=PACKAGE, executable="hexapod_description_joint_states", name="hexapod_description_joint_states",
            output="screen",
            parameters=[{"params_file": params_file,
                         "rate": ParameterValue(LaunchConfiguration("rate"), value_type=float)}, sim_time],
            remappings=[(TOPICS["joint_states"], LaunchConfiguration("joint_states_topic"))],
        ),
    ]
    wanted = [package for package, (flag, _) in OPTIONAL.items() if _flag(context, flag)]
    missing = missing_packages(wanted)
    # The robot runs without them: a warning, not a failed launch that leaves the other nodes behind.
    actions += [LogInfo(msg=f"WARNING: {package} is not installed: {OPTIONAL[package][1]} "
                            f"({OPTIONAL[package][0]}:=false silences this)") for package in missing]
    if STATE_PUBLISHER in wanted and STATE_PUBLISHER not in missing:
        urdf = gd.build_urdf(parameters, None)
        actions.append(Node(
            package=STATE_PUBLISHER, executable=STATE_PUBLISHER, output="screen",
            parameters=[{"robot_description": ParameterValue(urdf, value_type=str)}, sim_time],
            remappings=[("joint_states", full_joint_states)],
        ))
    if VIEWER in wanted and VIEWER not in missing:
        actions.append(Node(
            package=VIEWER, executable=VIEWER, output="screen",
            # -f: the fixed frame of the parameters file, whatever the shipped config says.
            arguments=["-d", PathJoinSubstitution([FindPackageShare(PACKAGE), *RVIZ_CONFIG]),
                       "-f", parameters.ros.base_frame],
            parameters=[sim_time],
        ))
    return actions


def generate_launch_description():
    return LaunchDescription([
        DeclareLaunchArgument("params_file",
                              default_value=PathJoinSubstitution([FindPackageShare(PACKAGE), "config", "hexapod.yaml"]),
                              description="YAML parameters of the robot (geometry, names)"),
        DeclareLaunchArgument("use_sim_time", default_value="false", choices=["true", "false"],
                              description="run on /clock (a simulator, or a bag played with --clock)"),
        DeclareLaunchArgument("rviz", default_value="false", choices=["true", "false"],
                              description="start RViz with config/hexapod.rviz"),
        DeclareLaunchArgument("rate", default_value="30.0",
                              description="highest rate of the full joint state and so of the TF [Hz]"),
        DeclareLaunchArgument("joint_states_topic", default_value=TOPICS["joint_states"],
                              description="where the slider states are published"),
        DeclareLaunchArgument("robot_state_publisher", default_value="true", choices=["true", "false"],
                              description="start robot_state_publisher (false: another one reads "
                                          f"{TOPICS['description_joint_states']}, as in gazebo.launch.py)"),
        OpaqueFunction(function=_setup),
    ])
