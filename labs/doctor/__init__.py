"""The environment doctor: what this machine has, whether the labs can run on it, and how to fix it.

``probe()`` gathers facts, ``evaluate(record, profile)`` judges them (pure, testable on recorded
probes), ``require_runnable(profile)`` is the fast guard each lab calls first, and
``python -m labs doctor`` prints the whole report.
"""

from labs.doctor.checks import ERROR, OK, WARNING, Check, errors, evaluate, verdict
from labs.doctor.cli import main
from labs.doctor.probe import ProbeRecord, probe
from labs.doctor.report import format_fixes, format_report, format_table
from labs.doctor.runnable import EnvironmentNotReady, EnvironmentWarning, require_runnable

__all__ = [
    "ERROR", "OK", "WARNING", "Check", "EnvironmentNotReady", "EnvironmentWarning", "ProbeRecord",
    "errors", "evaluate", "format_fixes", "format_report", "format_table", "main", "probe",
    "require_runnable", "verdict",
]
