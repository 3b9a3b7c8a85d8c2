"""The faked RTX 5090 (tests/fake_card.py) in a whole Python process: loaded at start-up when this folder is on
PYTHONPATH and FAKE_CARD=1 (tests/test_fake_card_runs.py sets both).

Why a start-up hook rather than calling the functions the child processes run: ``python -m labs rehearse`` starts
one child per lab (``python -m labs rehearse --part l71|l72``) and ``python -m labs next`` starts the step's
command, each in a fresh process because L7.2 must import unsloth before TRL; the children inherit the
environment, so each runs on the card exactly as it would on a 5090, and the test drives the course's commands
as the student types them. In-process, the test would have to unload trl, transformers and peft for the import
guard (labs.l72.standby) and import them again, leaving two copies in the test worker.
"""

import os
import sys

if os.environ.get("FAKE_CARD") == "1":
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/: fake_card
    import fake_card

    fake_card.install_for_process()
