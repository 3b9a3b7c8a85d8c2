"""A faked RTX 5090 for the GPU leg: the hardware answers, and nothing else is faked.

``torch.cuda`` answers as one RTX 5090 (32 GB of GDDR7, 31.4 GiB as torch reports it, compute capability 12.0 =
sm_120), and Unsloth's ``FastLanguageModel`` becomes a recording stand-in whose calls are bound to the
signatures of the installed (pinned) Unsloth: a keyword the real function does not name fails here as
``TypeError``. Its model has the shape the course uses: ``vllm_engine`` (whose ``llm_engine.vllm_config.
cache_config.gpu_memory_utilization`` is the fraction Unsloth handed to vLLM), ``fast_generate`` (taking
``lora_request``), ``save_lora`` and ``load_lora``. Every line of the course above these runs for real.

Why not import the real Unsloth to read its signatures: ``import unsloth`` patches trl, transformers and peft
for the life of the process (labs/l72/standby.py), so the signatures are read from the installed source with
``ast`` instead (no import), as labs/training/pinned_api.py reads the pinned wheels. Both Unsloth functions also
take ``**kwargs``; the signature bound here leaves it out, because the course never means to pass a keyword
that the named parameters do not hold (tests/test_api_drift.py says where each ``**kwargs`` would send one).
"""

from __future__ import annotations

import ast
import importlib.machinery
import importlib.metadata
import importlib.util
import inspect
import sys
import types
from dataclasses import dataclass, field
from pathlib import Path

GIB = 2**30
CARD_NAME = "NVIDIA GeForce RTX 5090"
CARD_TOTAL = int(31.36 * GIB)  # torch's total_memory for a 32 GB card once the driver holds its share
CAPABILITY = (12, 0)  # Blackwell consumer: sm_120


def unsloth_source(relpath: str) -> Path | None:
    """The installed Unsloth's file ``relpath`` (``models/loader.py``), found without importing unsloth."""
    # sys.path itself: neither sys.modules nor an import hook (the stand-in below is both, while a test runs)
    spec = importlib.machinery.PathFinder.find_spec("unsloth")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations))) / relpath


def installed_signature(relpath: str, qualname: str) -> inspect.Signature:
    """The signature of ``qualname`` (``Class.method``) in the installed Unsloth's ``relpath``, without
    ``**kwargs``: the named parameters and their kinds, with every default replaced by ``None``."""
    path = unsloth_source(relpath)
    if path is None:
        raise ModuleNotFoundError("Unsloth is not installed: the faked card binds to its real signatures")
    tree = ast.parse(path.read_text(encoding="utf-8"))
    class_name, name = qualname.split(".")
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == class_name)
    fn = next(n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == name)
    args = fn.args
    params = []
    positional = [*args.posonlyargs, *args.args]
    for i, arg in enumerate(positional):
        kind = (inspect.Parameter.POSITIONAL_ONLY if i < len(args.posonlyargs)
                else inspect.Parameter.POSITIONAL_OR_KEYWORD)
        has_default = i >= len(positional) - len(args.defaults)
        params.append(inspect.Parameter(arg.arg, kind, default=None if has_default else inspect.Parameter.empty))
    if args.vararg is not None:
        params.append(inspect.Parameter(args.vararg.arg, inspect.Parameter.VAR_POSITIONAL))
    for arg, default in zip(args.kwonlyargs, args.kw_defaults):
        params.append(inspect.Parameter(arg.arg, inspect.Parameter.KEYWORD_ONLY,
                                        default=inspect.Parameter.empty if default is None else None))
    return inspect.Signature(params)


# --------------------------------------------------------------------------------------------------
# The vLLM engine and the model Unsloth returns
# --------------------------------------------------------------------------------------------------


@dataclass
class LoRARequest:
    """vLLM's ``LoRARequest`` as the course reads it: a name, an id and the adapter's path."""

    lora_name: str
    lora_int_id: int
    lora_path: str


class FakeEngine:
    """vLLM's ``LLM`` as the course reads it: ``llm_engine.vllm_config.cache_config.gpu_memory_utilization``."""

    def __init__(self, gpu_memory_utilization: float):
        cache = types.SimpleNamespace(gpu_memory_utilization=gpu_memory_utilization)
        self.llm_engine = types.SimpleNamespace(vllm_config=types.SimpleNamespace(cache_config=cache))


@dataclass
class Calls:
    """Every call the stand-ins received, bound to the real signature: ``(name, {parameter: value})``."""

    log: list[tuple[str, dict]] = field(default_factory=list)

    def named(self, name: str) -> list[dict]:
        return [args for call, args in self.log if call == name]


class FakeModel:
    """What ``FastLanguageModel.from_pretrained(fast_inference=True)`` returns, as far as the course uses it."""

    def __init__(self, calls: Calls, fraction: float, fast_inference: bool = True):
        self.calls = calls
        if fast_inference:  # Unsloth sets model.vllm_engine only under fast_inference (models/llama.py, from_pretrained)
            self.vllm_engine = FakeEngine(fraction)
        self.loras: list[LoRARequest] = []

    def fast_generate(self, prompts, sampling_params=None, use_tqdm=True, lora_request=None):
        self.calls.log.append(("fast_generate", {"prompts": list(prompts), "sampling_params": sampling_params,
                                                 "lora_request": lora_request}))
        # vLLM's RequestOutput / CompletionOutput as the course reads them: the text, its token ids and their
        # cumulative log-probability; the adapter's name in the text, so an answer shows which weights wrote it
        tag = "" if lora_request is None else f" [{lora_request.lora_name}]"
        return [types.SimpleNamespace(prompt=p, outputs=[types.SimpleNamespace(
                    text=f"#### {i}{tag}", token_ids=[i], cumulative_logprob=-1.0 - (lora_request is not None))])
                for i, p in enumerate(prompts)]

    def save_lora(self, path):
        self.calls.log.append(("save_lora", {"path": str(path)}))
        Path(path).mkdir(parents=True, exist_ok=True)
        (Path(path) / "adapter_config.json").write_text("{}", encoding="utf-8")

    def load_lora(self, path, load_tensors=False):
        self.calls.log.append(("load_lora", {"path": str(path)}))
        request = LoRARequest(Path(path).name, len(self.loras) + 1, str(path))
        self.loras.append(request)
        return request


class FakeFastLanguageModel:
    """``from_pretrained`` and ``get_peft_model`` bound to the installed Unsloth's signatures, recorded."""

    def __init__(self, calls: Calls, tokenizer, standby_fraction):
        self.calls = calls
        self.tokenizer = tokenizer
        self.standby_fraction = standby_fraction  # what Unsloth hands vLLM: f(asked fraction) -> fraction
        self._from_pretrained = installed_signature("models/loader.py", "FastLanguageModel.from_pretrained")
        self._get_peft_model = installed_signature("models/llama.py", "FastLlamaModel.get_peft_model")

    def from_pretrained(self, *args, **kwargs):
        bound = self._from_pretrained.bind(*args, **kwargs)
        self.calls.log.append(("from_pretrained", dict(bound.arguments)))
        fast_inference = bound.arguments.get("fast_inference", self._from_pretrained.parameters["fast_inference"].default)
        model = FakeModel(self.calls, self.standby_fraction(kwargs.get("gpu_memory_utilization", 0.5)),
                          bool(fast_inference))
        if self.tokenizer == "from_repo":  # as Unsloth does: the repository's own tokenizer (tiny_hub's files)
            from transformers import AutoTokenizer

            return model, AutoTokenizer.from_pretrained(bound.arguments["model_name"])
        return model, self.tokenizer

    def get_peft_model(self, model, *args, **kwargs):
        bound = self._get_peft_model.bind(model, *args, **kwargs)
        self.calls.log.append(("get_peft_model", {k: v for k, v in bound.arguments.items() if k != "model"}))
        model.peft = dict(bound.arguments)
        return model


# --------------------------------------------------------------------------------------------------
# torch.cuda as one RTX 5090
# --------------------------------------------------------------------------------------------------


@dataclass
class FakeCudaState:
    """The card's memory as the stand-ins report it; a test moves ``allocated`` to play a run."""

    allocated: int = 0
    peak: int = 0
    reserved_peak: int = 0
    synchronized: int = 0
    emptied: int = 0  # calls to torch.cuda.empty_cache

    def allocate(self, nbytes: int) -> None:
        self.allocated += nbytes
        self.peak = max(self.peak, self.allocated)
        self.reserved_peak = max(self.reserved_peak, self.allocated)


def cuda_functions(state: FakeCudaState) -> dict:
    """The ``torch.cuda`` functions the course calls, answering as one RTX 5090."""
    props = types.SimpleNamespace(name=CARD_NAME, major=CAPABILITY[0], minor=CAPABILITY[1], total_memory=CARD_TOTAL,
                                  multi_processor_count=170, uuid="GPU-00000000-0000-0000-0000-000000005090")

    def one_device(device=None):
        index = getattr(device, "index", device)
        if index not in (None, 0, "cuda", "cuda:0"):
            raise RuntimeError(f"CUDA error: invalid device ordinal ({device!r}): one RTX 5090 is faked")

    def mem_get_info(device=None):
        one_device(device)
        return CARD_TOTAL - state.allocated, CARD_TOTAL

    def get_device_properties(device=None):
        one_device(device)
        return props

    def synchronize(device=None):
        one_device(device)
        state.synchronized += 1

    def reset_peak_memory_stats(device=None):
        state.peak = state.reserved_peak = state.allocated

    def empty_cache():
        state.emptied += 1

    return {
        "is_available": lambda: True,
        "is_initialized": lambda: True,
        "device_count": lambda: 1,
        "current_device": lambda: 0,
        "get_device_name": lambda device=None: (one_device(device), CARD_NAME)[1],
        "get_device_capability": lambda device=None: (one_device(device), CAPABILITY)[1],
        "get_device_properties": get_device_properties,
        "get_arch_list": lambda: ["sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120"],
        "is_bf16_supported": lambda including_emulation=True: True,
        "mem_get_info": mem_get_info,
        "synchronize": synchronize,
        "empty_cache": empty_cache,
        "max_memory_allocated": lambda device=None: state.peak,
        "max_memory_reserved": lambda device=None: state.reserved_peak,
        "memory_allocated": lambda device=None: state.allocated,
        "memory_reserved": lambda device=None: state.allocated,
        "reset_peak_memory_stats": reset_peak_memory_stats,
    }


class UnslothFinder:
    """An import hook that answers ``import unsloth`` with the stand-in, at the moment the course imports it."""

    def __init__(self, module: types.ModuleType):
        self.module = module
        self.imported_with: dict[str, str | None] = {}

    def find_spec(self, fullname, path=None, target=None):
        if fullname != "unsloth":
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec):
        import os

        self.imported_with["UNSLOTH_VLLM_STANDBY"] = os.environ.get("UNSLOTH_VLLM_STANDBY")
        return self.module

    def exec_module(self, module):
        return None


@dataclass
class FakeCard:
    """What a test holds while the card is faked: the memory state, the recorded calls, the stand-ins."""

    cuda: FakeCudaState
    calls: Calls
    unsloth: types.ModuleType
    finder: UnslothFinder


def install(monkeypatch, tokenizer=None) -> FakeCard:
    """Fake the card for one test (``monkeypatch`` undoes it all): torch.cuda, and ``import unsloth``."""
    import torch

    from labs.l72.memory import standby_target_fraction

    state = FakeCudaState()
    for name, fn in cuda_functions(state).items():
        monkeypatch.setattr(torch.cuda, name, fn)  # raising: a name this torch lacks fails here
    calls = Calls()
    total_gib = CARD_TOTAL / GIB
    vllm_version = importlib.metadata.version("vllm")

    def standby_fraction(asked):
        import os

        if os.environ.get("UNSLOTH_VLLM_STANDBY", "0") != "0" and os.environ.get(
                "UNSLOTH_VLLM_STANDBY_UTIL_OVERRIDE", "0") == "0":
            # Unsloth's own rule (labs/l72/memory.py reproduces it; tests/test_unsloth_lab.py runs the real one),
            # then applied to the free memory, which takes a little off
            return round(standby_target_fraction(total_gib, vllm_version) * 0.97, 6)
        return asked

    module = types.ModuleType("unsloth")
    module.__version__ = "2026.10.9"
    module.FastLanguageModel = FakeFastLanguageModel(calls, tokenizer, standby_fraction)
    module.is_bfloat16_supported = lambda: True
    finder = UnslothFinder(module)
    for key in [k for k in sys.modules if k == "unsloth" or k.startswith("unsloth.")]:
        monkeypatch.delitem(sys.modules, key)  # a real unsloth of this process comes back afterwards
    monkeypatch.setitem(sys.modules, "unsloth", module)  # so that undoing removes the stand-in the course imports
    del sys.modules["unsloth"]
    monkeypatch.setattr(sys, "meta_path", [finder, *sys.meta_path])
    return FakeCard(state, calls, module, finder)


# --------------------------------------------------------------------------------------------------
# A whole process on the card (tests/fake_card_site/sitecustomize.py) and the model files it reads
# --------------------------------------------------------------------------------------------------

def nvidia_smi_on_path(folder: Path, script: str, monkeypatch) -> Path:
    """An executable ``nvidia-smi`` in ``folder`` that runs the shell ``script``, put first on PATH for one test:
    the driver's tool, which the doctor, the rehearsal, the resource monitor and make ask."""
    import os

    folder.mkdir(parents=True, exist_ok=True)
    exe = folder / "nvidia-smi"
    exe.write_text("#!/bin/sh\n" + script + "\n", encoding="utf-8")
    exe.chmod(0o755)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
    return exe


PROCESS_ENV = "FAKE_CARD"  # "1": every Python process started with tests/fake_card_site on PYTHONPATH runs on the card
SITE = Path(__file__).resolve().parent / "fake_card_site"


def install_for_process() -> FakeCard:
    """The card for the rest of this process (sitecustomize: the labs' commands and the children they start).

    Unsloth's tokenizer is the model repository's own, read from the hub cache (:func:`tiny_hub`)."""
    import pytest

    return install(pytest.MonkeyPatch(), tokenizer="from_repo")  # never undone: the process ends with it


def tiny_hub(cache: Path) -> Path:
    """A Hugging Face hub cache at ``cache`` where every hub model id a profile names holds the bundled 135M model's files.

    The download is the one thing besides the card that this machine lacks (no network, and 8 GB per model): the
    doctor then finds the models cached, transformers loads real (tiny) weights under the 4B's name, and
    Unsloth's stand-in reads the repository's tokenizer. No weight of it reaches a CUDA kernel: the runs stop
    where the trainer moves the model to the card."""
    from labs.doctor.downloads import hub_models_of_all_profiles
    from labs.training import models

    source = models.convert_bundled_model()
    for model_id in hub_models_of_all_profiles():  # each profile's model, and Unsloth's 4-bit and 16-bit repos
        snapshot = cache / f"models--{model_id.replace('/', '--')}" / "snapshots" / ("0" * 40)
        snapshot.mkdir(parents=True, exist_ok=True)
        for f in Path(source).iterdir():
            if f.is_file() and not (snapshot / f.name).exists():
                (snapshot / f.name).symlink_to(f)
        refs = snapshot.parent.parent / "refs"
        refs.mkdir(exist_ok=True)
        (refs / "main").write_text("0" * 40, encoding="utf-8")
    return cache


def process_env(tmp: Path) -> dict:
    """The environment of a labs command run on the card: the site hook, the tiny hub, its own run area."""
    import os

    env = {**os.environ, PROCESS_ENV: "1", "HF_HUB_CACHE": str(tiny_hub(tmp / "hub")),
           "COURSE_RUNS": str(tmp / "runs"), "PYTHONPATH": os.pathsep.join(
               [str(SITE), str(SITE.parent.parent), *filter(None, [os.environ.get("PYTHONPATH")])])}
    env.pop("HF_HOME", None)
    return env
