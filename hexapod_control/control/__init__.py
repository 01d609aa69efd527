"""Reference trajectories, the two tracking controllers and the safety supervisor (no ROS)."""
