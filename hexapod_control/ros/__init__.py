"""ROS 2 side: the rclpy nodes, thin shells over the core (their message conventions, in plain
numbers, are ``hexapod_control.conventions``)."""
