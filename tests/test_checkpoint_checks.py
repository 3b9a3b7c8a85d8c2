"""Checkpoints a resume can trust (labs.training.checkpoints) with transformers' real Trainer on a tiny model.

A torn file of each kind is found and named; the torn checkpoint is set aside where neither the
trainer's rotation nor ``get_last_checkpoint`` looks; an atomic save interrupted half-way leaves the
previous checkpoint as the newest; ``resume_point`` says what it skipped and trims the metrics.
"""

import json

import pytest
import torch
from torch import nn

from labs.core.runfolder import RunFolder, write_jsonl
from labs.training import checkpoints, recipe


class Tiny(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(4, 1)

    def forward(self, x, y):
        return {"loss": nn.functional.mse_loss(self.linear(x).squeeze(-1), y)}


def tiny_trainer(output_dir, max_steps=3, atomic=True):
    from transformers import Trainer, TrainingArguments

    args = TrainingArguments(output_dir=str(output_dir), max_steps=max_steps, save_steps=1, save_total_limit=2,
                             per_device_train_batch_size=2, use_cpu=True, report_to=[], logging_steps=1,
                             disable_tqdm=True)
    data = [{"x": torch.randn(4), "y": torch.tensor(1.0)} for _ in range(16)]
    trainer = Trainer(model=Tiny(), args=args, train_dataset=data)
    if atomic:
        assert checkpoints.save_atomically(trainer)
    return trainer


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    out = tmp_path_factory.mktemp("run") / "checkpoints"
    tiny_trainer(out).train()
    return out


def copy(src, dst):
    import shutil

    shutil.copytree(src, dst)
    return dst


def test_atomic_saves_leave_whole_checkpoints_and_no_staging(trained):
    assert sorted(p.name for p in trained.iterdir() if p.name.startswith("checkpoint-")) == ["checkpoint-2", "checkpoint-3"]
    assert not (trained / checkpoints.STAGING_DIR).exists()
    for step in (2, 3):
        assert checkpoints.problem(trained / f"checkpoint-{step}") is None


@pytest.mark.parametrize("victim,expected", [
    ("model.safetensors", "model.safetensors está cortado"),
    ("optimizer.pt", "optimizer.pt está cortado"),
    ("scheduler.pt", "scheduler.pt está cortado"),
    ("rng_state.pth", "rng_state.pth está cortado"),
])
def test_a_truncated_file_is_named(trained, tmp_path, victim, expected):
    folder = copy(trained / "checkpoint-3", tmp_path / "checkpoint-3")
    path = folder / victim
    with open(path, "r+b") as fh:
        fh.truncate(path.stat().st_size - 4)  # the last bytes never reached the disk
    assert checkpoints.problem(folder).startswith(expected)


def test_a_cut_header_a_missing_file_and_a_broken_state_are_named(trained, tmp_path):
    folder = copy(trained / "checkpoint-3", tmp_path / "checkpoint-3")
    with open(folder / "model.safetensors", "r+b") as fh:
        fh.truncate(20)
    assert "cabecera cortada" in checkpoints.problem(folder)
    folder = copy(trained / "checkpoint-3", tmp_path / "b" / "checkpoint-3")
    (folder / "scheduler.pt").unlink()
    assert checkpoints.problem(folder) == "falta scheduler.pt"
    (folder / "trainer_state.json").write_text('{"global_st')
    assert checkpoints.problem(folder) == "trainer_state.json está incompleto o no es JSON"


def test_resume_point_skips_a_torn_newest_sets_it_aside_and_trims_metrics(trained, tmp_path, capsys):
    run = RunFolder(tmp_path / "run")
    copy(trained, run.checkpoints)
    torn = run.checkpoints / "checkpoint-3" / "model.safetensors"
    size = torn.stat().st_size - 4
    with open(torn, "r+b") as fh:
        fh.truncate(size)
    write_jsonl(run.metrics_path, [{"step": s, "loss": 0.1} for s in (1, 2, 3)])
    assert recipe.resume_point(run) == str(run.checkpoints / "checkpoint-2")
    out = capsys.readouterr().out
    assert "[run] checkpoint-3 está roto (model.safetensors está cortado" in out
    assert "checkpoints/_rotos/checkpoint-3" in out and "Continúo desde checkpoint-2" in out
    assert (run.checkpoints / "_rotos" / "checkpoint-3" / "model.safetensors").stat().st_size == size
    assert [m["step"] for m in run.metrics()] == [1, 2]


def test_the_trainer_never_picks_nor_rotates_a_set_aside_or_staged_folder(trained, tmp_path):
    from transformers.trainer_utils import get_last_checkpoint, rotate_checkpoints, sort_checkpoints

    out = copy(trained, tmp_path / "checkpoints")
    checkpoints.set_aside(out / "checkpoint-3")
    (out / checkpoints.STAGING_DIR / "checkpoint-9").mkdir(parents=True)
    assert get_last_checkpoint(str(out)) == str(out / "checkpoint-2")
    assert sort_checkpoints(str(out)) == [str(out / "checkpoint-2")]
    rotate_checkpoints(str(out), save_total_limit=1)
    assert (out / "_rotos" / "checkpoint-3").is_dir() and (out / checkpoints.STAGING_DIR / "checkpoint-9").is_dir()


def test_a_save_interrupted_half_way_leaves_the_previous_checkpoint_newest(tmp_path):
    out = tmp_path / "checkpoints"
    trainer = tiny_trainer(out, max_steps=3)
    original = trainer._save_optimizer_and_scheduler

    def dies_at_step_3(output_dir):
        if trainer.state.global_step == 3:
            raise KeyboardInterrupt("killed while saving")  # the weights are written, the optimizer not
        return original(output_dir)

    trainer._save_optimizer_and_scheduler = dies_at_step_3
    with pytest.raises(KeyboardInterrupt):
        trainer.train()
    assert not (out / "checkpoint-3").exists()
    assert (out / checkpoints.STAGING_DIR / "checkpoint-3" / "model.safetensors").exists()
    from transformers.trainer_utils import get_last_checkpoint

    assert get_last_checkpoint(str(out)) == str(out / "checkpoint-2")
    assert checkpoints.newest_usable(out) == (out / "checkpoint-2", [])
    assert checkpoints.remove_staging(out) and not (out / checkpoints.STAGING_DIR).exists()
    # and the trainer resumes from it
    tiny_trainer(out, max_steps=3).train(resume_from_checkpoint=str(out / "checkpoint-2"))
    state = json.loads((out / "checkpoint-3" / "trainer_state.json").read_text())
    assert state["global_step"] == 3 and checkpoints.problem(out / "checkpoint-3") is None


def test_without_the_atomic_save_the_same_interruption_leaves_a_torn_newest(tmp_path):
    """The fault the atomic save prevents, shown on the trainer's own save."""
    out = tmp_path / "checkpoints"
    trainer = tiny_trainer(out, max_steps=3, atomic=False)
    original = trainer._save_optimizer_and_scheduler

    def dies_at_step_3(output_dir):
        if trainer.state.global_step == 3:
            raise KeyboardInterrupt("killed while saving")
        return original(output_dir)

    trainer._save_optimizer_and_scheduler = dies_at_step_3
    with pytest.raises(KeyboardInterrupt):
        trainer.train()
    assert (out / "checkpoint-3").is_dir() and checkpoints.problem(out / "checkpoint-3") == "falta trainer_state.json (el guardado no terminó)"
    assert checkpoints.newest_usable(out)[0] == out / "checkpoint-2"


def test_a_metrics_line_torn_after_its_checkpoint_comes_back_from_the_checkpoint(trained, tmp_path, capsys):
    """Killed right after checkpoint-3 was saved, with metrics.jsonl's step-3 line cut short (a power loss):
    the resume trains step 4 only, and step 3's line is rebuilt from checkpoint-3's log_history (issue 34)."""
    run = RunFolder(tmp_path / "run")
    copy(trained, run.checkpoints)
    history = json.loads((trained / "checkpoint-3" / "trainer_state.json").read_text())["log_history"]
    logged = {entry["step"]: entry for entry in history if "loss" in entry}
    assert sorted(logged) == [1, 2, 3]
    whole = [{"step": s, **{k: v for k, v in logged[s].items() if k != "step"}, "course/generation_seconds": 0.5}
             for s in (1, 2)]
    write_jsonl(run.metrics_path, whole)
    with open(run.metrics_path, "a", encoding="utf-8") as fh:
        fh.write(json.dumps({"step": 3, **logged[3]})[:25])  # the line the power loss cut short
    assert recipe.resume_point(run) == str(run.checkpoints / "checkpoint-3")
    out = capsys.readouterr().out
    assert "metrics.jsonl había perdido el paso 3" in out and "Sin registro" not in out
    rows = run.metrics()
    assert [m["step"] for m in rows] == [1, 2, 3]
    assert rows[:2] == whole  # the whole lines are kept as they were
    assert rows[2]["loss"] == logged[3]["loss"] and rows[2]["course/rebuilt_from"] == "checkpoint-3/trainer_state.json"

    trainer = tiny_trainer(run.checkpoints, max_steps=4)
    for callback in recipe.run_folder_callbacks(run):
        trainer.add_callback(callback)
    trainer.train(resume_from_checkpoint=str(run.checkpoints / "checkpoint-3"))
    assert [m["step"] for m in run.metrics()] == [1, 2, 3, 4]


def test_a_step_neither_file_nor_checkpoint_holds_is_named(trained, tmp_path, capsys):
    run = RunFolder(tmp_path / "run")
    copy(trained, run.checkpoints)
    state_file = run.checkpoints / "checkpoint-3" / "trainer_state.json"
    state = json.loads(state_file.read_text())
    state["log_history"] = [e for e in state["log_history"] if e.get("step") != 2]
    state_file.write_text(json.dumps(state))
    write_jsonl(run.metrics_path, [{"step": 1, "loss": 0.1}])
    recipe.resume_point(run)
    assert [m["step"] for m in run.metrics()] == [1, 3]
    assert "Sin registro en metrics.jsonl ni en checkpoint-3: el paso 2." in capsys.readouterr().out
