"""A student's reward that hangs from a chosen step on (tests/test_l71_run.py).

It reads ``trainer_state.global_step`` as a schedule would (TRL passes the trainer's state), and
sleeps for an hour from step ``RECOMPENSA_LENTA_DESDE_PASO`` on, as a runaway regular expression would
hang; without that variable it pays nothing and returns at once.
"""

import os
import time


def recompensa_lenta(completions, trainer_state, **kwargs):
    start = os.environ.get("RECOMPENSA_LENTA_DESDE_PASO")
    if start and trainer_state.global_step + 1 >= int(start):
        time.sleep(3600)
    return [0.0] * len(completions)
