"""L7.2's CPU path (``cpu``, ``ci``): the same recipe with transformers + PEFT.

Unsloth 2026.10.9 trains only SFT on a CPU: ``from_pretrained(fast_inference=True)`` raises
``NotImplementedError`` and TRL's GRPO trainer is left unpatched. The same recipe then runs with
transformers + PEFT: a LoRA adapter of the same rank, alpha and targets (``recipe.lora_config``,
passed as ``peft_config`` to GRPOTrainer), generation in TRL's colocated vLLM engine when the
profile says so. The output says so plainly.
"""

from __future__ import annotations

from pathlib import Path

from labs.training import data as course_data
from labs.training import recipe
from labs import l71
from labs.core.profiles import Profile, get_profile
from labs.core.runfolder import write_json
from labs.l72 import trainer as l72_trainer
from labs.l72.backend import WHY_NO_UNSLOTH_ON_CPU_ES, choose_backend
from labs.l72.lora import lora_engine_check, require_engine_has_adapter
from labs.l72.memory import MemoryFraction, engine_memory_fraction
from labs.l72.steps import LAB, print_vram_plans, update_run_json

class FallbackLab(l71.Lab):
    """L7.2 on a CPU: L7.1's steps (``l71.Lab``) with a PEFT LoRA of the lesson's rank, alpha and targets.

    What changes against L7.1: ``backend="unsloth"`` in the profile, the ``"L7.2"`` label and folder,
    the LoRA adapter, ``run.json`` fields for the back-end and the memory fraction in force, a check that
    TRL's vLLM engine really generates from the trained adapter before the "trained" evaluation, and
    ``resources.json``.
    """

    def __init__(self, profile=None, run_name=None, fresh=False, saved=True, **overrides):
        from labs.l72 import recipe_rule

        profile = profile if isinstance(profile, Profile) else get_profile(profile)
        # the student's recipe on this engine: saved knobs and reward functions, LoRA by the stated rule
        planned = recipe_rule.plan(profile, overrides, saved=saved)
        super().__init__(planned.profile, run_name, fresh, None, LAB, reward_funcs=planned.reward_funcs)
        self.recipe_record = recipe_rule.record(planned.profile, planned.reward_funcs, planned.recipe_profile)
        self.backend = choose_backend(self.profile)
        requested = self.profile.vllm_gpu_memory_utilization
        self.fraction = (MemoryFraction(requested, requested, "trl-colocate", device="cpu") if self.profile.use_vllm
                         else MemoryFraction(requested, None, "no-vllm", device="cpu"))
        self.engine_check: dict | None = None

    def run_all(self) -> Path:
        if not self.finished:
            print(f"[backend] {self.backend.name}: {self.backend.reason_es}")
            print_vram_plans(self.profile)
        return super().run_all()

    def format_pass(self) -> str:
        base_model = super().format_pass()  # writes run.json as L7.1 does
        update_run_json(self.run, backend_used=self.backend.name, backend_reason_es=self.backend.reason_es,
                        vllm_memory_fraction=self.fraction.as_dict(),
                        **({} if self.read_only else {"l72_recipe": self.recipe_record}))
        return base_model

    def build_trainer(self):
        # The GPU path's trainer (labs.l72.trainer): the same GRPOConfig keywords, and trainer.args in run.json
        self.trainer = l72_trainer.make_trainer(self.profile, self.run, self.base_model, self.reward_funcs,
                                                course_data.to_dataset(self.splits["train"]),
                                                peft_config=recipe.lora_config(self.profile))
        self.generate = l71.generator(self.trainer, self.profile)
        print(f"[lora] LoRA de PEFT: r={self.profile.lora_r}, alpha={self.profile.lora_alpha}, módulos "
              f"{', '.join(self.profile.lora_targets)}.")
        if (engine := self._engine()) is not None:
            self.fraction = self.fraction.with_engine_value(engine_memory_fraction(engine.llm))
            update_run_json(self.run, vllm_memory_fraction=self.fraction.as_dict())
        print(f"[vllm] {self.fraction.describe_es()}")
        return self.trainer

    def _engine(self):
        return getattr(self.trainer, "vllm_generation", None) if self.profile.use_vllm else None

    def evaluate_trained(self) -> dict:
        if self._engine() is not None:
            l71.sync_engine(self.trainer, self.profile)  # TRL merges the adapter and pushes the result
            check = self.engine_check = lora_engine_check(self.trainer)
            print(f"[vllm] Pesos del motor frente al modelo con el adaptador fusionado: diferencia máxima "
                  f"{check['max_abs_diff']:.3g} ({check['compared']} tensores); el adaptador cambia los pesos "
                  f"hasta {check['adapter_max_delta']:.3g}.")
            require_engine_has_adapter(check)
        summary = super().evaluate_trained()  # syncs again (same weights), evaluates, saves, summarises
        if self.engine_check is not None and summary is not None:
            summary["engine_lora_check"] = self.engine_check
            write_json(self.run.path("eval/summary.json"), summary)
        return summary

    def resource_fields(self) -> dict:
        return {"backend_used": self.backend.name}

    def finish(self) -> None:
        print(f"[backend] Recuerda: este run NO usó la ruta GPU de Unsloth. {WHY_NO_UNSLOTH_ON_CPU_ES}")
        super().finish()
