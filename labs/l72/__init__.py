"""Lab L7.2: the L7.1 recipe with Unsloth and vLLM Standby on Qwen3-4B, or its CPU stand-in.

Same run folder (labs.core.runfolder), same rewards, same data, same evaluation as L7.1 (this package calls
``labs.l71``, ``labs.training.recipe`` and ``labs.training.evaluation``; it copies none of them). What changes
is how the model is loaded and trained::

    python -m labs l72 [--profile cpu|ci|rtx5090|rtx5090-base] [--run-name NAME] [--fresh] [--set key=value ...]

On a GPU profile (CUDA visible, Unsloth installed) Unsloth loads the model with vLLM inside under Standby
and trains LoRA adapters; on a CPU profile the same recipe runs with transformers + PEFT, and says so.
The second half puts L7.1 and L7.2 side by side from their run folders for the notebook
``notebooks/L7_2_unsloth_standby.ipynb``.

Modules, one job each:

- ``standby``: the Standby variables, the import order (``enable_standby_and_import_unsloth``) and the
  guard that turns a failed load into "restart the kernel" (``standby_load_guard``);
- ``backend``: which back-end runs (``choose_backend``, ``gpu_path``);
- ``memory``: the vLLM memory fraction in force (``expected_gpu_fraction``, ``MemoryFraction``);
- ``lora``: evaluation with the trained LoRA really loaded (``require_lora_request``, ``evaluate_unsloth``);
- ``recipe_rule``: what L7.2 trains, the student's saved recipe with only the engine's stated changes (``plan``,
  ``record``: ``l72_recipe`` in run.json);
- ``steps``: what both paths share (``start``: every check before a model loads, without importing trl,
  transformers or peft; ``profile_for_l72``, ``print_vram_plans``, ``record_run``);
- ``trainer``: L7.2's GRPOTrainer (``grpo_config_kwargs`` with TRL's values where Unsloth would swap its own,
  ``drop_reference_adapter``, ``record_trainer_settings``: trainer.args in run.json);
- ``gpu``: the GPU path (the two Unsloth calls' keywords, the run);
- ``fallback``: the CPU path (``FallbackLab``);
- ``lab``: ``run_lab``, which picks the path;
- ``compare``: L7.1 against L7.2 (``lab_record``, ``comparison_table``, ``plot_comparison``); ``child_runs``: each
  lab in a child process with its output in a log (``ensure_l71_run``, ``run_lab_in_subprocess``);
- ``cli``: ``main``, the command line;
- ``answers``: the checks of the four cells the student writes in the notebook (behaviour, no model, no real
  import), with ``sandbox`` (stand-in unsloth/trl/transformers/peft that record the import order) and ``rules``
  (each argument of the two Unsloth calls against the lesson's rule);
- ``model_ids``: whether a model id exists (errata 2): the hub on a GPU profile, else Unsloth's table of models;
- ``standin``: the CPU stand-in for ``FastLanguageModel`` those cells call on a CPU profile;
- ``demo``: the notebook's runs: a few-step demo through the student's cells, and the long runs it only reads.

Everything the notebook and the tests use is re-exported here (``from labs import l72``).
"""

from __future__ import annotations


from labs.core.resources import ResourceMonitor, write_resources
from labs.l72.backend import (BACKEND_FALLBACK, BACKEND_UNSLOTH, WHY_NO_UNSLOTH_ON_CPU_ES, Backend,
                              BackendUnavailable, choose_backend, gpu_path, unsloth_installed)
from labs.l72.cli import main
from labs.l72.child_runs import (ensure_l71_run, prime_format_pass_in_subprocess, run_l71_in_subprocess,
                                 run_lab_in_subprocess)
from labs.l72.compare import (COMPARABLE_FIELDS, comparison_table, describe_comparison_es, describe_settings_es,
                              find_lab_run, lab_record, plot_comparison, settings_differences)
from labs.l72.fallback import FallbackLab
from labs.l72.gpu import from_pretrained_kwargs, get_peft_model_kwargs
from labs.l72.lab import run_lab
from labs.l72.lora import (LoraNotLoaded, evaluate_unsloth, lora_engine_check, require_engine_has_adapter,
                           require_lora_request, save_adapter)
from labs.l72.memory import (NEWER_VLLM_FACTOR, STANDBY_TIERS, STANDBY_TIERS_BEFORE_VLLM_0_11, MemoryFraction,
                             _fmt, engine_memory_fraction, expected_gpu_fraction, standby_target_fraction,
                             unsloth_memory_fraction)
from labs.l72.standby import (ORDER_SENSITIVE_MODULES, RESTART_ES, STANDBY_ENV, UTIL_OVERRIDE_ENV,
                              ImportOrderError, UnslothLoadFailed, enable_standby_and_import_unsloth,
                              standby_load_guard)
from labs.l72.steps import (L72_PROFILE_FOR, LAB, L72Start, check_4bit_vllm_plugin, check_unsloth_path,
                            finish_resources, package_version, print_vram_plans, profile_for_l72, record_run, start,
                            update_run_json)
from labs.l72.trainer import (COURSE_VALUES, SWAPS_WITHOUT_EFFECT, drop_reference_adapter, grpo_config_kwargs,
                              make_trainer, prepare_trainer, record_trainer_settings, trainer_settings)



__all__ = [
    "BACKEND_FALLBACK", "BACKEND_UNSLOTH", "COMPARABLE_FIELDS", "COURSE_VALUES", "L72_PROFILE_FOR", "LAB",
    "NEWER_VLLM_FACTOR", "SWAPS_WITHOUT_EFFECT",
    "ORDER_SENSITIVE_MODULES", "RESTART_ES", "STANDBY_ENV", "STANDBY_TIERS", "STANDBY_TIERS_BEFORE_VLLM_0_11",
    "UTIL_OVERRIDE_ENV", "WHY_NO_UNSLOTH_ON_CPU_ES",
    "Backend", "BackendUnavailable", "FallbackLab", "L72Start", "ImportOrderError", "LoraNotLoaded", "MemoryFraction",
    "ResourceMonitor", "UnslothLoadFailed",
    "_fmt", "check_4bit_vllm_plugin", "check_unsloth_path", "choose_backend", "comparison_table",
    "describe_comparison_es", "describe_settings_es", "drop_reference_adapter", "enable_standby_and_import_unsloth",
    "engine_memory_fraction", "ensure_l71_run",
    "evaluate_unsloth", "expected_gpu_fraction", "find_lab_run", "finish_resources", "from_pretrained_kwargs",
    "get_peft_model_kwargs", "gpu_path", "grpo_config_kwargs", "make_trainer", "prepare_trainer",
    "profile_for_l72", "record_trainer_settings", "settings_differences", "trainer_settings", "lab_record",
    "lora_engine_check", "main", "package_version",
    "plot_comparison", "prime_format_pass_in_subprocess", "print_vram_plans", "record_run",
    "require_engine_has_adapter", "require_lora_request", "run_l71_in_subprocess", "run_lab", "run_lab_in_subprocess", "save_adapter",
    "standby_load_guard", "standby_target_fraction", "start", "unsloth_installed", "unsloth_memory_fraction",
    "update_run_json", "write_resources",
]
