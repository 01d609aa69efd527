"""The real Hexapod: trajectory + controller (+ FK) around the robot's ros2_control driver.

    ros2 launch hexapod_control hardware.launch.py controller:=double_loop
    ros2 service call /hexapod_robot_stack/arm std_srvs/srv/SetBool "{data: true}"
    ros2 service call /hexapod_robot_stack/start std_srvs/srv/Trigger

``layout:=one_process`` (default) runs hexapod_robot_stack: the controller samples the trajectory
itself at each joint state's stamp, in one lean process (what holds 1 kHz on a small PC; see
benchmarks/bench_loop.py). ``layout:=separate_nodes`` starts the FK, trajectory and controller
nodes as separate processes instead (services /hexapod_controller/arm, /hexapod_trajectory/start),
for labs that want to replace one of them.

``driver:=none`` (default): the lab's own driver, not started here. ``driver:=quanser`` starts
hexapod_drive on a Quanser HIL board (its default ``board:=quanser``: the ``hexapod.board`` section of the
parameters file is required, the Quanser SDK's Python API too; NOT RUN ON HARDWARE, see
doc/quanser_driver.md); ``driver:=fake`` starts hexapod_fake_driver (with ``gain_set:=simulated_plant``).
Either driver runs at the stack's ``realtime_priority``.

The driver must provide /joint_states at ``controllers.rate`` with the joint
names of the parameters file (joint_state_broadcaster) and a JointGroupEffortController listening on
/effort_controller/commands; the two topic arguments remap them if the driver names them otherwise.
Nothing moves on its own: the controller starts disarmed (zero forces), and the trajectory node
holds the measured pose until ~/start or a goal on ~/goal_pose.
To check a PC against hexapod_fake_driver instead of the robot, add ``gain_set:=simulated_plant``:
its plant is the rigid-body model without the drives, on which the double loop's robot gains are
unstable (as in simulation.launch.py).
visualization.launch.py publishes the TF of all 25 bodies (``rviz:=true`` also starts RViz); a
driver that starts its own robot_state_publisher should not, or should have it read
/hexapod/description_joint_states, where every joint of the description is.
"""

import os

from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, IncludeLaunchDescription
from launch.conditions import IfCondition
from launch.launch_description_sources import PythonLaunchDescriptionSource
from launch.substitutions import AndSubstitution, EqualsSubstitution, LaunchConfiguration, PathJoinSubstitution
from launch_ros.actions import Node
from launch_ros.parameter_descriptions import ParameterValue
from launch_ros.substitutions import FindPackageShare

from hexapod_control.control.controllers import CONTROLLER_NAMES
from hexapod_control.control.trajectory_player import TRAJECTORY_CHOICES
from hexapod_control.model.parameters import GAIN_SETS
from hexapod_control.ros.common import CONTROL_LOOP_PRIORITY

PACKAGE = "hexapod_control"
# robot_state_publisher with the full joint state, and RViz: next to this file, installed or not.
VISUALIZATION = os.path.join(os.path.dirname(os.path.abspath(__file__)), "visualization.launch.py")


def generate_launch_description():
    use_sim_time = ParameterValue(LaunchConfiguration("use_sim_time"), value_type=bool)
    common = {"params_file": ParameterValue(LaunchConfiguration("params_file"), value_type=str)}
    joint_states = ("/joint_states", LaunchConfiguration("joint_states_topic"))
    commands = ("/effort_controller/commands", LaunchConfiguration("effort_commands_topic"))

    one_process = IfCondition(EqualsSubstitution(LaunchConfiguration("layout"), "one_process"))
    separate = IfCondition(EqualsSubstitution(LaunchConfiguration("layout"), "separate_nodes"))
    arguments = [
        DeclareLaunchArgument("layout", default_value="one_process", choices=["one_process", "separate_nodes"],
                              description="one_process: hexapod_robot_stack; separate_nodes: FK, trajectory and controller nodes"),
        DeclareLaunchArgument("controller", default_value="double_loop", choices=list(CONTROLLER_NAMES),
                              description="control law of the controller node"),
        DeclareLaunchArgument("gain_set", default_value="robot", choices=list(GAIN_SETS),
                              description="gains of the robot, or simulated_plant for a rigid-body plant without "
                                          "drives such as hexapod_fake_driver (the double loop's robot gains are "
                                          "unstable there)"),
        DeclareLaunchArgument("trajectory", default_value="operational_space", choices=list(TRAJECTORY_CHOICES),
                              description="trajectory run by ~/start"),
        DeclareLaunchArgument("use_sim_time", default_value="false", choices=["true", "false"],
                              description="true only when a simulator (e.g. Gazebo) publishes /clock"),
        DeclareLaunchArgument("params_file",
                              default_value=PathJoinSubstitution([FindPackageShare(PACKAGE), "config", "hexapod.yaml"]),
                              description="YAML parameters of the robot (geometry, gains, limits, safety)"),
        DeclareLaunchArgument("joint_states_topic", default_value="/joint_states",
                              description="where the driver publishes the slider states"),
        DeclareLaunchArgument("effort_commands_topic", default_value="/effort_controller/commands",
                              description="command topic of the driver's JointGroupEffortController"),
        DeclareLaunchArgument("with_trajectory", default_value="true", choices=["true", "false"],
                              description="separate_nodes: start the trajectory node (false: publish /hexapod/reference yourself)"),
        DeclareLaunchArgument("rviz", default_value="false", choices=["true", "false"],
                              description="start RViz (TF of the 25 bodies is published either way)"),
        DeclareLaunchArgument("inverse_dynamics", default_value="false", choices=["true", "false"],
                              description="start the inverse-dynamics node (predicted forces, residual, feed-forward)"),
        DeclareLaunchArgument("driver", default_value="none", choices=["quanser", "fake", "none"],
                              description="quanser: hexapod_drive on a Quanser board (hexapod.board section; not run "
                                          "on hardware); fake: hexapod_fake_driver; none: the lab's own driver"),
        DeclareLaunchArgument("realtime_priority", default_value=str(CONTROL_LOOP_PRIORITY),
                              description="one_process: SCHED_FIFO priority of hexapod_robot_stack's threads, as "
                                          "ros2_control's controller manager; 0: the normal scheduler"),
    ]
    nodes = [
        Node(
            package=PACKAGE, executable="hexapod_robot_stack", name="hexapod_robot_stack", output="screen",
            condition=one_process,
            parameters=[common, {"controller": LaunchConfiguration("controller"),
                                 "gain_set": LaunchConfiguration("gain_set"),
                                 "trajectory": LaunchConfiguration("trajectory"), "arm_on_start": False,
                                 "autostart": False, "use_sim_time": use_sim_time,
                                 "realtime_priority": ParameterValue(LaunchConfiguration("realtime_priority"),
                                                                     value_type=int)}],
            remappings=[joint_states, commands],
        ),
        Node(
            package=PACKAGE, executable="hexapod_fk_node", name="hexapod_forward_kinematics", output="screen",
            condition=separate, parameters=[common, {"use_sim_time": use_sim_time}], remappings=[joint_states],
        ),
        Node(
            package=PACKAGE, executable="hexapod_trajectory_node", name="hexapod_trajectory", output="screen",
            condition=IfCondition(AndSubstitution(EqualsSubstitution(LaunchConfiguration("layout"), "separate_nodes"),
                                                  LaunchConfiguration("with_trajectory"))),
            parameters=[common, {"trajectory": LaunchConfiguration("trajectory"), "autostart": False,
                                 "use_sim_time": use_sim_time}],
        ),
        Node(
            package=PACKAGE, executable="hexapod_controller_node", name="hexapod_controller", output="screen",
            condition=separate, parameters=[common, {"controller": LaunchConfiguration("controller"),
                                                     "gain_set": LaunchConfiguration("gain_set"), "arm_on_start": False,
                                                     "use_sim_time": use_sim_time}],
            remappings=[joint_states, commands],
        ),
        Node(
            package=PACKAGE, executable="hexapod_inverse_dynamics", name="hexapod_inverse_dynamics", output="screen",
            condition=IfCondition(LaunchConfiguration("inverse_dynamics")),
            parameters=[common, {"use_sim_time": use_sim_time}],
            remappings=[joint_states, commands],
        ),
    ]
    driver_priority = {"realtime_priority": ParameterValue(LaunchConfiguration("realtime_priority"), value_type=int)}
    nodes += [
        Node(
            package=PACKAGE, executable="hexapod_drive", name="hexapod_drive", output="screen",
            condition=IfCondition(EqualsSubstitution(LaunchConfiguration("driver"), "quanser")),
            parameters=[common, driver_priority], remappings=[joint_states, commands],
        ),
        Node(
            package=PACKAGE, executable="hexapod_fake_driver", name="hexapod_fake_driver", output="screen",
            condition=IfCondition(EqualsSubstitution(LaunchConfiguration("driver"), "fake")),
            parameters=[common, driver_priority], remappings=[joint_states, commands],
        ),
    ]
    visualization = IncludeLaunchDescription(
        PythonLaunchDescriptionSource(VISUALIZATION),
        launch_arguments={"params_file": LaunchConfiguration("params_file"),
                          "use_sim_time": LaunchConfiguration("use_sim_time"),
                          "joint_states_topic": LaunchConfiguration("joint_states_topic"),
                          "rviz": LaunchConfiguration("rviz")}.items(),
    )
    return LaunchDescription(arguments + nodes + [visualization])
