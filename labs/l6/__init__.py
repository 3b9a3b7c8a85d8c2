"""Lesson L6 (theory): group advantages, toy RL experiments, and the check against a real GRPOTrainer step."""
