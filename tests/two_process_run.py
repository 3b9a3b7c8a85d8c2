"""One process of ``python -m labs l71`` under ``accelerate launch`` (run by test_multi_process.py).

    accelerate launch --multi_gpu --num_processes 2 tests/two_process_run.py OUT_DIR [--interrupt] -- L71_ARGS

Runs the lab's own command line (``labs.l71.cli.main``) unchanged, with two additions the test needs:
it keeps the trainer ``make_trainer`` built, so it can write this process's weights digest (before and
after training) to ``OUT_DIR/rank<R>.json``; and with ``--interrupt`` it stops training right after the
first checkpoint is saved, on every process, the way Ctrl+C does (KeyboardInterrupt), so the next
launch has something to resume.
"""

from __future__ import annotations

import hashlib
import json
import os
import resource
import sys
from pathlib import Path


def weights_digest(model) -> str:
    digest = hashlib.sha256()
    for name, param in sorted(model.named_parameters()):
        digest.update(name.encode())
        digest.update(param.detach().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()


def main() -> int:
    split = sys.argv.index("--")
    own, lab_args = sys.argv[1:split], sys.argv[split + 1 :]
    out, interrupt = Path(own[0]), "--interrupt" in own

    from transformers import TrainerCallback

    from labs.l71 import cli
    from labs.training import recipe

    class StopAfterFirstSave(TrainerCallback):
        def on_save(self, args, state, control, **kwargs):
            raise KeyboardInterrupt("detenido por la prueba tras el primer checkpoint")

    built = {}
    make_trainer = recipe.make_trainer

    def keep(*args, **kwargs):
        trainer = make_trainer(*args, **kwargs)
        built["trainer"], built["before"] = trainer, weights_digest(trainer.model)
        if interrupt:
            trainer.add_callback(StopAfterFirstSave())
        return trainer

    recipe.make_trainer = keep
    code = cli.main(lab_args)
    record = {"rank": int(os.environ.get("RANK", 0)), "world_size": int(os.environ.get("WORLD_SIZE", 1)),
              "exit_code": code, "peak_rss_gib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20}
    if "trainer" in built:
        trainer = built["trainer"]
        record.update(before=built["before"], after=weights_digest(trainer.model),
                      global_step=trainer.state.global_step)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"rank{record['rank']}.json").write_text(json.dumps(record))
    # The interruption is the expected outcome: exit 0 so the launcher does not kill the other process
    # while it is still recording why it stopped (the exit code the lab gave is in the record).
    return 0 if interrupt and code == 1 else code


if __name__ == "__main__":
    sys.exit(main())
