"""ROS 2 side: message conventions (ROS-free) and the rclpy nodes, thin shells over the core."""
