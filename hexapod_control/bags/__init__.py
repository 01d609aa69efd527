"""rosbag2 bags: message encoding, writing, reading and salvage of damaged files."""
