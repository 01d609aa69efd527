"""Gazebo Sim simulation of the Hexapod under ros2_control, with the project's FK, trajectory and
controller nodes.

    ros2 launch hexapod_control gazebo.launch.py [controller:=double_loop|computed_torque]
        [params_file:=/path/hexapod.yaml] [use_sim_time:=true] [gui:=true] [rviz:=false]

The robot description, the controllers file and the world are generated from ``params_file`` by
:mod:`hexapod_control.simulation.gazebo_description` into a temporary folder, so a different parameter set
needs no other edit. Order of events, and why:

1. gz sim starts PAUSED with the generated world, robot_state_publisher publishes the URDF.
2. ros_gz_sim create spawns it. gz_ros2_control resets the sliders to ``home_actuator_position``
   (``initial_value``), where the passive joints' zero values assemble the loops; the
   DetachableJoint welds that close the loops are then created from that pose. Nothing steps
   while paused, so the welds hold the exact home assembly.
3. One spawner loads and configures joint_state_broadcaster and effort_controller INACTIVE
   (``--inactive``). Loading and configuring are services the controller manager answers at once;
   activating is not: gz_ros2_control runs the controller manager's update (where a switch takes
   effect) only in PostUpdate once simulated time has advanced by a control period, so a switch
   requested while paused waits until it times out ("Switch controller timed out",
   gz_ros2_control#421) and the controllers never run.
4. Then both controllers are activated in one request (``ros2 control switch_controllers``),
   which waits in the controller manager for its next update, and ``UNPAUSE_LEAD_S`` later the
   world is unpaused: the first update performs the switch, so the drives are without a command
   for a period or two only (as a loop delay: the effort controller holds zero until the first
   command arrives). Unpausing first instead would let the unpowered platform sink for as long as
   the activation takes to arrive (about a second of simulated time at real-time factor 1).
5. The FK, trajectory and controller nodes run on /clock; the controller arms at the first
   joint state and compensates the loop delay (controllers.delay_compensation).
"""

import os
import tempfile
from pathlib import Path

from launch import LaunchDescription
from launch.actions import (
    DeclareLaunchArgument,
    ExecuteProcess,
    IncludeLaunchDescription,
    LogInfo,
    OpaqueFunction,
    RegisterEventHandler,
    TimerAction,
)
from launch.event_handlers import OnProcessExit
from launch.launch_description_sources import PythonLaunchDescriptionSource
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node
from launch_ros.parameter_descriptions import ParameterValue

from hexapod_control.control.controllers import CONTROLLER_NAMES
from hexapod_control.conventions import TOPICS
from hexapod_control.model.parameters import default_parameters_path, load_parameters
from hexapod_control.ros.launch_support import missing_packages, parse_flag
from hexapod_control.simulation import gazebo_description as gd

PACKAGE = "hexapod_control"
# Without any of these the simulation cannot run: checked before anything starts.
REQUIRED_PACKAGES = ("ros_gz_sim", "ros_gz_bridge", "controller_manager", "robot_state_publisher")
CONTROLLER_MANAGER = "/controller_manager"  # gz_ros2_control's controller manager node
# How long the unpause request waits for gz sim to answer [ms]; the world is local.
GZ_SERVICE_TIMEOUT_MS = "5000"
# Wall time from starting the activation request to unpausing [s]: the ros2 CLI starts and sends
# its request in ~1-2 s. The controller manager waits SWITCH_TIMEOUT_S for the update that
# performs the switch, which must come within the CLI's 10 s service-call timeout.
UNPAUSE_LEAD_S = 3.0
SWITCH_TIMEOUT_S = "8.0"


def _flag(context, name: str) -> bool:
    return parse_flag(name, LaunchConfiguration(name).perform(context))


def _setup(context, *args, **kwargs):
    from ament_index_python.packages import get_package_share_directory

    missing = missing_packages(REQUIRED_PACKAGES)
    if missing:
        raise RuntimeError(f"gazebo.launch.py needs {', '.join(missing)} (not installed); nothing was "
                           "started (simulation.launch.py runs without Gazebo)")
    params_file = LaunchConfiguration("params_file").perform(context)
    controller = LaunchConfiguration("controller").perform(context)
    if controller not in CONTROLLER_NAMES:
        raise ValueError(f"launch argument controller: expected one of {CONTROLLER_NAMES}, got {controller!r}")
    use_sim_time = _flag(context, "use_sim_time")
    gui = _flag(context, "gui")

    parameters = load_parameters(params_file)
    folder = Path(tempfile.mkdtemp(prefix="hexapod_gazebo_"))
    controllers_file = folder / "gz_ros2_controllers.yaml"
    controllers_file.write_text(gd.build_controllers_yaml(parameters))
    world_file = folder / "world.sdf"
    world_file.write_text(gd.build_world_sdf(parameters))
    urdf = gd.build_urdf(parameters, controllers_file)
    (folder / "hexapod.urdf").write_text(urdf)  # for inspection; Gazebo takes it from the topic
    sim_time = {"use_sim_time": use_sim_time}

    # Without -r the world starts paused; -s runs the server only (no GUI).
    gz_args = f"{world_file} -v 3" + ("" if gui else " -s")
    gazebo = IncludeLaunchDescription(
        PythonLaunchDescriptionSource(
            os.path.join(get_package_share_directory("ros_gz_sim"), "launch", "gz_sim.launch.py")
        ),
        launch_arguments={"gz_args": gz_args, "on_exit_shutdown": "true"}.items(),
    )
    state_publisher = Node(
        package="robot_state_publisher",
        executable="robot_state_publisher",
        output="screen",
        parameters=[{"robot_description": ParameterValue(urdf, value_type=str)}, sim_time],
        # /joint_states holds the sliders only: the full joint state gives the TF of every body.
        remappings=[("joint_states", TOPICS["description_joint_states"])],
    )
    # The full joint state and RViz; this file's robot_state_publisher spawns the Gazebo description.
    visualization = IncludeLaunchDescription(
        PythonLaunchDescriptionSource(os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                   "visualization.launch.py")),
        launch_arguments={"params_file": str(Path(params_file).resolve()), "use_sim_time": str(use_sim_time).lower(),
                          "rviz": str(_flag(context, "rviz")).lower(), "robot_state_publisher": "false"}.items(),
    )
    spawn = Node(
        package="ros_gz_sim",
        executable="create",
        output="screen",
        arguments=["-world", gd.WORLD_NAME, "-name", gd.MODEL_NAME, "-topic", "robot_description"],
    )
    clock_bridge = Node(
        package="ros_gz_bridge",
        executable="parameter_bridge",
        output="screen",
        arguments=[f"{TOPICS['clock']}@rosgraph_msgs/msg/Clock[gz.msgs.Clock"],
    )

    controllers = [gd.JOINT_STATE_BROADCASTER, gd.EFFORT_CONTROLLER]
    # Load and configure only: no switch can happen while the world is paused (step 3).
    configure = Node(
        package="controller_manager",
        executable="spawner",
        output="screen",
        arguments=[*controllers, "--controller-manager", CONTROLLER_MANAGER, "--inactive"],
    )
    activate = ExecuteProcess(
        cmd=["ros2", "control", "switch_controllers", "--controller-manager", CONTROLLER_MANAGER, "--strict",
             "--switch-timeout", SWITCH_TIMEOUT_S, "--activate", *controllers],
        output="screen",
    )
    unpause = ExecuteProcess(
        cmd=["gz", "service", "-s", f"/world/{gd.WORLD_NAME}/control", "--reqtype", "gz.msgs.WorldControl",
             "--reptype", "gz.msgs.Boolean", "--timeout", GZ_SERVICE_TIMEOUT_MS, "--req", "pause: false"],
        output="screen",
    )
    node_parameters = [{"params_file": str(Path(params_file).resolve())}, sim_time]
    nodes = [
        Node(package=PACKAGE, executable="hexapod_fk_node", output="screen", parameters=node_parameters),
        Node(package=PACKAGE, executable="hexapod_trajectory_node", output="screen", parameters=node_parameters),
        Node(
            package=PACKAGE,
            executable="hexapod_controller_node",
            output="screen",
            # arm_on_start: a simulation starts at home, so the controller may take over at once.
            # Gazebo simulates the rigid-body model (no rotor inertia): the simulated_plant gains.
            parameters=node_parameters + [{"controller": controller, "gain_set": "simulated_plant", "arm_on_start": True}],
        ),
    ]
    return [
        LogInfo(msg=f"hexapod Gazebo description in {folder} (initial joint positions: "
                    f"{gd.joint_positions(parameters)})"),
        gazebo,
        state_publisher,
        visualization,
        clock_bridge,
        spawn,
        RegisterEventHandler(OnProcessExit(target_action=spawn, on_exit=[configure])),
        # The activation waits for the first update; the unpause gives it (step 4).
        RegisterEventHandler(OnProcessExit(target_action=configure, on_exit=[
            activate, TimerAction(period=UNPAUSE_LEAD_S, actions=[unpause])])),
        *nodes,
    ]


def generate_launch_description() -> LaunchDescription:
    return LaunchDescription(
        [
            DeclareLaunchArgument("controller", default_value=CONTROLLER_NAMES[0], choices=list(CONTROLLER_NAMES),
                                  description="operational-space controller of hexapod_controller_node"),
            DeclareLaunchArgument("params_file", default_value=str(default_parameters_path()),
                                  description="YAML parameters file of the robot"),
            DeclareLaunchArgument("use_sim_time", default_value="true",
                                  description="nodes run on the /clock of Gazebo"),
            DeclareLaunchArgument("gui", default_value="true", description="start the Gazebo GUI"),
            DeclareLaunchArgument("rviz", default_value="false", description="start RViz with config/hexapod.rviz"),
            OpaqueFunction(function=_setup),
        ]
    )
