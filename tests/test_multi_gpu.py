"""Beyond one GPU, the parts that run without one: the batch rule, server-mode configuration, the
commands (parsed by TRL's and accelerate's own parsers), the accelerate configs and the VRAM plan on N
cards. The two-process training run is tests/test_multi_process.py."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from labs.core import distributed
from labs.core.profiles import get_profile
from labs.training import launch, preflight, recipe
from labs.vram import multi, planner

ROOT = Path(__file__).resolve().parent.parent


# --- which process writes -------------------------------------------------------------------------


def test_rank_and_world_size_come_from_the_launcher_variables(monkeypatch):
    for name in ("RANK", "WORLD_SIZE"):
        monkeypatch.delenv(name, raising=False)
    assert distributed.world_size() == 1 and distributed.is_main_process() and not distributed.is_distributed()
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "1")
    assert distributed.is_distributed() and not distributed.is_main_process()
    with distributed.single_process_env():
        assert distributed.world_size() == 1 and distributed.is_main_process()
    assert distributed.world_size() == 2  # restored


# --- the batch rule -----------------------------------------------------------------------------


def test_batch_rule_counts_the_processes():
    # per-device 2 x GA 1 = 2 completions: not a multiple of G=4 on one process, a multiple on two
    profile = get_profile("ci").replace(per_device_train_batch_size=2)
    assert preflight.check_batch(profile, processes=2) == []
    (problem,) = preflight.check_batch(profile, processes=1)
    assert "no es múltiplo de num_generations=4" in problem
    # 4 x 3 x 1 = 12 is a multiple of 4; 6 x 3 x 1 = 18 is not: the message shows the product and the fix
    assert preflight.check_batch(get_profile("ci"), processes=3) == []
    (problem,) = preflight.check_batch(get_profile("ci").replace(per_device_train_batch_size=6), processes=3)
    assert "Con 3 procesos" in problem and "6 x 3 x 1 = 18" in problem and "múltiplo de 4" in problem


def test_batch_rule_reads_the_launch_by_default(monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "3")
    profile = get_profile("ci").replace(per_device_train_batch_size=6)
    with pytest.raises(preflight.PreflightError, match="Con 3 procesos"):
        preflight.preflight(profile)


def test_batch_rule_agrees_with_trl_formula():
    """TRL 1.16 (GRPOConfig.__post_init__): generation_batch_size = per_device x world_size x steps_per_generation,
    steps_per_generation = gradient_accumulation_steps; it must be divisible by num_generations."""
    import inspect

    from trl import GRPOConfig

    source = inspect.getsource(GRPOConfig.__post_init__)
    assert "self.per_device_train_batch_size * num_processes * self.steps_per_generation" in source
    assert "self.steps_per_generation = self.gradient_accumulation_steps" in source
    for b, n, ga, g in [(4, 2, 1, 4), (2, 2, 1, 4), (6, 3, 1, 4), (8, 1, 4, 8), (3, 2, 2, 4)]:
        profile = get_profile("ci").replace(per_device_train_batch_size=b, gradient_accumulation_steps=ga,
                                            num_generations=g)
        assert (preflight.check_batch(profile, processes=n) == []) == ((b * n * ga) % g == 0)


# --- server mode: configuration and refusal on CPU ------------------------------------------------


def test_server_mode_builds_trl_config_with_host_and_port(tmp_path):
    from trl import GRPOConfig

    profile = get_profile("ci").replace(vllm_mode="server", vllm_server_host="10.0.0.5", vllm_server_port=8123)
    kwargs = recipe.grpo_config_kwargs(profile, str(tmp_path))
    assert kwargs["vllm_mode"] == "server" and "vllm_gpu_memory_utilization" not in kwargs
    config = GRPOConfig(**kwargs)  # builds on CPU; only the trainer's NCCL weight sync needs CUDA
    assert (config.vllm_server_host, config.vllm_server_port, config.use_vllm) == ("10.0.0.5", 8123, True)


def test_server_mode_on_cpu_is_refused_before_loading_anything():
    with pytest.raises(preflight.PreflightError, match="vllm_mode='server' necesita GPUs CUDA"):
        preflight.preflight(get_profile("ci").replace(vllm_mode="server"))
    assert preflight.check_vllm(get_profile("rtx5090").replace(vllm_mode="server")) == []


def test_trl_refuses_weight_sync_from_a_cpu_device():
    """Why the server layout cannot be run here: TRL's client raises on a non-CUDA device."""
    import inspect

    from trl.generation.vllm_client import VLLMClient

    source = inspect.getsource(VLLMClient.init_communicator)
    assert 'device.type != "cuda"' in source and "NotImplementedError" in source


def test_the_server_command_parses_with_trl_and_enables_weight_transfer():
    from trl.scripts.vllm_serve import build_command, make_parser

    profile = get_profile("rtx5090")
    serve, train = launch.server(profile, 4)
    assert serve.startswith("CUDA_VISIBLE_DEVICES=3 trl vllm-serve ")
    assert "CUDA_VISIBLE_DEVICES=0,1,2 " in train and "--num_processes 3" in train and "vllm_mode=server" in train
    args, extra = make_parser(prog="trl vllm-serve").parse_args_and_config(
        args=launch.serve_arguments(profile), return_remaining_strings=True)
    assert extra == [] and args.model == profile.model and args.max_model_len == profile.vllm_max_model_length
    command = build_command(args)
    assert "--weight-transfer-config" in command and '{"backend": "nccl"}' in command
    with pytest.raises(ValueError, match="al menos 2 GPUs"):
        launch.server(profile, 1)


# --- accelerate: configs and command lines ------------------------------------------------------


@pytest.mark.parametrize("name,kind,stage", [("multi_gpu", "MULTI_GPU", None), ("zero2", "DEEPSPEED", 2),
                                             ("zero3", "DEEPSPEED", 3)])
def test_accelerate_configs_load_and_use_known_keys(name, kind, stage):
    from accelerate.commands.config.config_args import load_config_from_file
    from accelerate.commands.launch import launch_command_parser

    config = load_config_from_file(str(ROOT / "configs" / "accelerate" / f"{name}.yaml"))
    assert config.distributed_type.name == kind and config.mixed_precision == "bf16"
    if stage is not None:
        assert config.deepspeed_config["zero_stage"] == stage
        # accelerate copies each deepspeed_config key onto a `launch` option of the same name
        options = {a.dest for a in launch_command_parser()._actions}
        assert set(config.deepspeed_config) <= options, set(config.deepspeed_config) - options


def test_every_lab_command_parses_with_accelerate_and_the_lab():
    from accelerate.commands.launch import launch_command_parser

    from labs.l71.cli import main as _  # noqa: F401 - the lab's own parser is exercised below
    profile = get_profile("rtx5090")
    lines = (launch.colocate(profile, 2) + launch.zero3(profile, 8) + launch.server(profile, 4)[1:]
             + launch.cpu_two_processes(get_profile("ci")))
    for line in lines:
        words = line.split()
        words = words[words.index("accelerate") + 2:]  # after "accelerate launch"
        args = launch_command_parser().parse_args(words)
        assert args.module and args.training_script == "labs" and args.training_script_args[0] == "l71"
        config = args.config_file
        assert config is None or (ROOT / config).exists()
        lab_args = args.training_script_args[1:]
        assert lab_args[lab_args.index("--profile") + 1] in ("rtx5090", "ci")


# --- VRAM on N cards ----------------------------------------------------------------------------


def test_colocate_on_n_cards_needs_what_one_card_needs():
    profile = get_profile("rtx5090")
    one = planner.plan(profile, "trl", 32.0)
    (two,) = multi.plan_gpus(profile, 2, card_gib=32.0)
    assert two.total_gib == pytest.approx(one.total_gib) and two.fits == one.fits
    assert any("2 procesos" in n for n in two.notes)


def test_zero_stages_split_the_training_state():
    profile = get_profile("rtx5090").replace(use_lora=False)
    totals = [multi.plan_gpus(profile, 4, zero=z, card_gib=80.0)[0].total_gib for z in (0, 1, 2, 3)]
    assert totals[3] < totals[2] < totals[1] < totals[0]  # stage 1: 12 B/param over 4 cards < AdamW's 4 B
    (z3,) = multi.plan_gpus(profile, 4, zero=3, card_gib=80.0)
    p = z3.params
    assert z3.line("Gradientes (bf16), 1/4").gib == pytest.approx(p * 2 / 4 / 2**30)
    assert z3.line("Optimizador de DeepSpeed (fp32: copia maestra + 2 momentos), 1/4").gib == pytest.approx(
        p * 12 / 4 / 2**30)
    assert z3.line("vLLM: su copia de los pesos (bf16)").gib == pytest.approx(p * 2 / 2**30)  # never split


def test_server_layout_moves_vllm_to_its_own_card():
    profile = get_profile("rtx5090")
    training, server = multi.plan_gpus(profile, 3, layout="server", card_gib=32.0)
    assert not any(line.name.startswith("vLLM") for line in training.lines)
    assert server.total_gib == pytest.approx(multi.SERVER_UTILIZATION * 32.0)
    assert any("2 procesos" in n for n in training.notes)
    with pytest.raises(multi.LayoutError, match="al menos 2 tarjetas"):
        multi.plan_gpus(profile, 1, layout="server")


def test_vram_cli_prints_the_plan_for_two_gpus():
    result = subprocess.run([sys.executable, "-m", "labs", "vram", "--profile", "rtx5090", "--gpus", "2",
                             "--card-gib", "32"], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "TRL + vLLM colocate en 2 tarjetas" in result.stdout and "Total estimado" in result.stdout
    full = subprocess.run([sys.executable, "-m", "labs", "vram", "--profile", "rtx5090", "--gpus", "2",
                           "--card-gib", "32", "--set", "use_lora=false", "--path", "trl"],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert full.returncode == 1 and "DeepSpeed ZeRO-3" in full.stdout  # does not fit: the knobs say what would


def test_l72_refuses_several_processes_in_spanish():
    env = dict(os.environ, WORLD_SIZE="2", RANK="0")
    result = subprocess.run([sys.executable, "-m", "labs", "l72", "--profile", "ci"], capture_output=True,
                            text=True, cwd=ROOT, env=env, timeout=120)
    assert result.returncode == 2
    assert "corre en una sola GPU" in result.stderr and "Se lanzaron 2" in result.stderr


@pytest.mark.parametrize("name", ["rtx5090", "rtx5090-base"])
def test_the_generating_card_names_the_model_the_training_cards_train(name):
    """Issue 52: on the rtx5090-base route the server plan labelled the generating card with the instruct model
    (the architecture table's name), while the training cards and `trl vllm-serve --model` use the base model."""
    training, serving = multi.plan_gpus(get_profile(name), 4, "server", card_gib=32.0)
    assert serving.model == training.model and ("Base" in serving.model) == (name == "rtx5090-base")
