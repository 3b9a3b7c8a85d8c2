"""Shared by every lab: profiles, paths, the run folder, run info, resources, statistics, diagnostics."""
