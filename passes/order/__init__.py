"""Peak-memory ordering passes (objective ``peak-mem``): one method per module."""
