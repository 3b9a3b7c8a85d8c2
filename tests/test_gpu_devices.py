"""Device placement on the GPU branches, checked without a GPU.

Every tensor that GPU-branch code creates must follow the device of the data it meets. Two checks:

1. The tensor bookkeeping of each GPU branch runs under torch's ``FakeTensorMode`` on a fake accelerator device,
   with a stub model whose parameters live there. A tensor made on the CPU beside them raises
   ``FakeTensorDeviceMismatchError``, as the real mix raises "Expected all tensors to be on the same device" on
   a card. The fake device is CUDA where torch is a CUDA build (the GPU stack's leg: CUDA wheels work without a
   GPU) and ``meta`` on the CPU build, which cannot index fake CUDA tensors ("PyTorch is not linked with
   support for cuda devices") but checks a meta/CPU mix the same way.
   Fake tensors hold no values: a branch that reads one (``float``, ``.tolist()``) stops there with
   ``DataDependentOutputException``. Where that is the last step (a loop's first pass reads its result), every
   device operation before it has run; ``_on_fake_device`` says how far each branch got.
2. A scan lists every tensor factory call in the GPU-branch modules that names no device and is not moved at
   once (``.to(...)``): such a tensor lives on the CPU whatever the data's device.
"""

from __future__ import annotations

import ast
import contextlib
from pathlib import Path
from types import SimpleNamespace

import pytest

torch = pytest.importorskip("torch")
from torch._subclasses.fake_tensor import (  # noqa: E402
    DataDependentOutputException,
    DynamicOutputShapeException,
    FakeTensorMode,
)

ROOT = Path(__file__).resolve().parents[1]
FAKE_DEVICE = "cuda" if torch.backends.cuda.is_built() else "meta"

# Modules with code that runs on a GPU when one is there. A new module that names CUDA or a model's device must be
# added (test_every_module_that_names_a_device_is_listed), so the scan keeps covering the class.
GPU_BRANCH_MODULES = (
    "labs/l6/capstone.py",
    "labs/l6/trainer_check.py",
    "labs/l6/microstep.py",
    "labs/training/evaluation.py",
    "labs/training/format_pass.py",
    "labs/training/failures.py",
    "labs/l71/trap.py",
    "labs/rehearsal/engine_shift.py",
    "labs/rehearsal/measure.py",
    "labs/rehearsal/budget.py",
    "labs/rehearsal/unsloth_part.py",
    "labs/rehearsal/cli.py",
    "labs/exercises/fluency_measures.py",
    "labs/l72/demo.py",
    "labs/l72/gpu.py",
    "labs/l72/backend.py",
)
# Modules that name CUDA only to ask about the machine (is there a GPU, how much memory, which wheel): no tensors.
MACHINE_QUERY_MODULES = (
    "labs/doctor/gpu_stack.py",
    "labs/doctor/checks_stack.py",
    "labs/doctor/checks_common.py",
    "labs/doctor/probe.py",
    "labs/vram/spec.py",
    "labs/core/profile_choice.py",
    "labs/core/resources.py",
    "labs/core/runinfo.py",
    "labs/core/profiles.py",
)
# Modules that name a device only in a comment or a quote of TRL, and make their tensors on the CPU by design.
CPU_ONLY_MODULES = (
    "labs/training/reward_outputs.py",  # TRL's conversion of a reward's output, replayed on the CPU to vet it
)
FACTORIES = {"arange", "randn", "rand", "randint", "randperm", "zeros", "ones", "full", "empty", "tensor",
             "as_tensor", "eye", "linspace", "logspace"}


class StubModel(torch.nn.Module):
    """A causal LM's interface over one embedding matrix on the fake device: ``F.embedding`` refuses ids on
    another device, as a real model's first layer does."""

    def __init__(self, vocab: int = 11, device: str = FAKE_DEVICE):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.zeros(vocab, vocab, device=device))
        self.calls = 0

    @property
    def device(self):
        return self.weight.device

    def forward(self, input_ids, attention_mask=None, logits_to_keep=0):
        self.calls += 1
        if attention_mask is not None:
            assert attention_mask.device == self.weight.device
        logits = torch.nn.functional.embedding(input_ids, self.weight)
        return SimpleNamespace(logits=logits[:, -logits_to_keep:] if logits_to_keep else logits)

    def generate(self, input_ids, attention_mask=None, max_new_tokens=1, **kwargs):
        new = self(input_ids, attention_mask).logits[:, -1:].argmax(-1).repeat(1, max_new_tokens)
        return torch.cat([input_ids, new], dim=1)


def _on_fake_device(branch) -> str:
    """Run ``branch()`` under ``FakeTensorMode``: "done", or "stopped at a data read" (see the module's docstring).
    A device mix raises ``FakeTensorDeviceMismatchError`` and fails the test."""
    # Real tensors met inside (a ``torch.tensor`` of Python numbers) become fake ones on their own device.
    with FakeTensorMode(allow_non_fake_inputs=True):
        try:
            branch()
        except (DataDependentOutputException, DynamicOutputShapeException):
            return "stopped at a data read"
        except RuntimeError as exc:  # ``.numpy()`` of a fake tensor
            if "not supported for tensor subclasses" not in str(exc):
                raise
            return "stopped at a data read"
    return "done"


def _fake_batch(rows: int = 4, prompt: int = 3, completion: int = 6) -> dict:
    ids = dict(dtype=torch.long, device=FAKE_DEVICE)
    return {"prompt_ids": torch.zeros(rows, prompt, **ids), "completion_ids": torch.zeros(rows, completion, **ids),
            "prompt_mask": torch.ones(rows, prompt, **ids), "completion_mask": torch.ones(rows, completion, **ids),
            "advantages": torch.zeros(rows, device=FAKE_DEVICE)}


def test_capstone_prepared_batch_follows_the_batch_device():
    """The cut lengths, the position index and the seeded noise land where the trainer's batch is (they were made
    on the CPU beside a CUDA batch: "Expected all tensors to be on the same device")."""
    from labs.l6 import capstone

    seen = {}

    def branch():
        model = StubModel()
        trainer = SimpleNamespace(model=model, args=SimpleNamespace(epsilon=0.2))
        out = capstone.prepared_tensors({"trainer": trainer, "batch": _fake_batch()})
        seen.update(model_calls=model.calls, devices={k: v.device.type for k, v in out["inputs"].items()},
                    now=out["now"].device.type)

    assert _on_fake_device(branch) == "done"
    assert seen["model_calls"] == 1
    assert set(seen["devices"].values()) == {FAKE_DEVICE} and seen["now"] == FAKE_DEVICE


@pytest.mark.parametrize("loss_type", ["grpo", "dapo", "dr_grpo"])
def test_capstone_student_side_on_the_batch_device(loss_type):
    """The reference log-probabilities and loss (what the notebook's student functions are checked against) run on
    the batch's device and backpropagate there."""
    from labs.l6 import capstone

    def branch():
        model = StubModel()
        batch = _fake_batch()
        ids = torch.cat([batch["prompt_ids"], batch["completion_ids"]], dim=1)
        width = batch["completion_mask"].shape[1]
        logits = model(ids, logits_to_keep=width + 1).logits
        logp = capstone.token_logps(logits, ids[:, -(width + 1):], batch["completion_mask"])
        loss = capstone.reference_loss(logp, logp.detach(), logp.detach(), batch["advantages"],
                                       batch["completion_mask"], 0.04, loss_type, 0.2, width)
        assert loss.requires_grad and loss.device.type == FAKE_DEVICE
        if FAKE_DEVICE == "meta":  # autograd's engine asks the driver for a CUDA device: not without a GPU
            loss.backward()
            assert model.weight.grad.device.type == FAKE_DEVICE

    assert _on_fake_device(branch) == "done"


def test_evaluation_generate_hf_moves_the_prompts_to_the_model():
    from transformers import BatchEncoding

    from labs.training import evaluation

    class Tokenizer:
        pad_token, eos_token, pad_token_id, padding_side = "<pad>", "<pad>", 0, "right"

        def apply_chat_template(self, messages, **kwargs):
            return messages[-1]["content"]

        def __call__(self, texts, **kwargs):
            return BatchEncoding({"input_ids": torch.ones(len(texts), 5, dtype=torch.long),
                                  "attention_mask": torch.ones(len(texts), 5, dtype=torch.long)})

    model = {}

    def branch():
        model["m"] = StubModel()
        evaluation.generate_hf(model["m"], Tokenizer(), [{"prompt": [{"role": "user", "content": "2+2"}]}], 3)

    assert _on_fake_device(branch) == "stopped at a data read"
    assert model["m"].calls == 1  # generate ran on the moved prompts; reading the new tokens is the data read


def test_rehearsal_trainer_logprobs_on_the_model_device():
    from labs.rehearsal import engine_shift

    model = {}

    def branch():
        model["m"] = StubModel()
        engine_shift.trainer_logprobs(model["m"], [([1, 2, 3], [4, 5])])

    assert _on_fake_device(branch) == "stopped at a data read"
    assert model["m"].calls == 1


def test_fluency_scorer_on_its_device():
    from labs.exercises.fluency_measures import LogProbScorer

    class Tokenizer:
        def __call__(self, text, add_special_tokens=False):
            return {"input_ids": [1 + (ord(c) % 9) for c in text]}

    model = {}

    def branch():
        scorer = object.__new__(LogProbScorer)
        model["m"] = scorer.model = StubModel()
        scorer.tokenizer, scorer.device = Tokenizer(), FAKE_DEVICE
        scorer.token_logprobs("ab", "cd")

    assert _on_fake_device(branch) in ("done", "stopped at a data read")
    assert model["m"].calls == 1


def _factory_calls_without_device(source: str) -> list[tuple[int, str]]:
    """``torch.<factory>(...)`` calls with no ``device=`` keyword whose result is not moved at once (``.to(...)``)."""
    tree = ast.parse(source)
    moved = set()
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "to"
                and isinstance(node.func.value, ast.Call)):
            moved.add(id(node.func.value))
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        func = node.func
        if not (isinstance(func.value, ast.Name) and func.value.id == "torch" and func.attr in FACTORIES):
            continue
        if id(node) in moved or any(k.arg == "device" for k in node.keywords):
            continue
        found.append((node.lineno, f"torch.{func.attr}"))
    return sorted(found)


def test_scan_finds_a_factory_without_device():
    """The scan itself: the capstone's old lines are found, the fixed ones are not."""
    old = ("lengths = torch.randint(1, 5, (4,), generator=gen)\n"
           "keep = torch.arange(width).unsqueeze(0) < lengths\n"
           "noise = torch.randn(now.shape, generator=gen)\n")
    new = ("lengths = torch.randint(1, 5, (4,), generator=gen).to(device)\n"
           "keep = torch.arange(width, device=device).unsqueeze(0) < lengths\n"
           "noise = torch.randn(now.shape, generator=gen).to(now)\n")
    assert [name for _, name in _factory_calls_without_device(old)] == ["torch.randint", "torch.arange",
                                                                        "torch.randn"]
    assert _factory_calls_without_device(new) == []


def test_gpu_branch_modules_make_no_tensor_without_a_device():
    found = {path: calls for path in GPU_BRANCH_MODULES
             if (calls := _factory_calls_without_device((ROOT / path).read_text(encoding="utf-8")))}
    assert not found, f"tensor factories without a device in GPU-branch code: {found}"


def test_every_module_that_names_a_device_is_listed():
    """A module of labs/ that names CUDA or a model's device is a GPU branch (scanned), a machine query or CPU-only."""
    listed = set(GPU_BRANCH_MODULES) | set(MACHINE_QUERY_MODULES) | set(CPU_ONLY_MODULES)
    naming = {str(p.relative_to(ROOT)) for p in (ROOT / "labs").rglob("*.py")
              if any(word in p.read_text(encoding="utf-8") for word in ("cuda", "model.device", "device=device"))}
    assert naming <= listed, f"add to GPU_BRANCH_MODULES (or say why not): {sorted(naming - listed)}"
    assert all((ROOT / p).exists() for p in listed)


def test_capstone_refuses_precision_that_breaks_its_tolerances():
    """On a card the comparison's 1e-5 needs float32 products: a half-precision model or TF32 is named first."""
    from labs.l6 import capstone

    assert capstone.precision_problem(StubModel(device="cpu")) is None
    assert "float16" in capstone.precision_problem(StubModel(device="cpu").half())
    before = torch.get_float32_matmul_precision()
    try:
        torch.set_float32_matmul_precision("high")
        assert "TF32" in capstone.precision_problem(StubModel(device="cpu"))
    finally:
        torch.set_float32_matmul_precision(before)


@pytest.mark.parametrize("device", ["cpu", FAKE_DEVICE])
def test_capstone_reads_tf32_set_through_torch_213s_per_backend_api(device):
    """Set through ``fp32_precision`` (the API torch 2.13 recommends), TF32 is named, not a crash: the legacy getter
    the check read raises once the new API has been used ("mix of the legacy and new APIs"). A model on a CUDA
    device (a fake tensor's device) is checked against cuBLAS's setting, one on the CPU against oneDNN's."""
    from labs.l6 import capstone

    backend = torch.backends.cuda.matmul if device == "cuda" else torch.backends.mkldnn.matmul
    other = torch.backends.mkldnn.matmul if device == "cuda" else torch.backends.cuda.matmul
    with FakeTensorMode(allow_non_fake_inputs=True) if device != "cpu" else contextlib.nullcontext():
        model = StubModel(device=device)
    try:
        backend.fp32_precision = "tf32"
        problem = capstone.precision_problem(model)
        assert problem is not None and "TF32" in problem and "fp32_precision" in problem, problem
        backend.fp32_precision, other.fp32_precision = "ieee", "tf32"  # the other back-end's setting does not count
        assert capstone.precision_problem(model) is None
    finally:
        backend.fp32_precision = other.fp32_precision = "none"  # unset: the legacy getters work again


def test_the_micro_steps_comparison_refuses_precision_that_breaks_its_tolerances():
    """The micro-step shares the capstone's tolerances: it refuses a half-precision model before replaying TRL."""
    from labs.l6 import microstep

    trainer = SimpleNamespace(model=StubModel(device="cpu").half())
    with pytest.raises(ValueError, match="float16"):
        microstep.compare_with_trl({"trainer": trainer}, None, None, None)


def test_the_capstones_docstring_names_the_kernel_file_the_loss_goes_through():
    """TRL's loss scores the completion through ``ChunkedLogProbFunction`` (a Triton kernel, so only where Triton
    imports: the GPU stack); the tolerances' reasoning quotes that file, not another kernel of TRL."""
    import inspect
    import re

    from labs.l6 import capstone

    utils = pytest.importorskip("trl.trainer.utils")
    kernel = getattr(utils, "_ChunkedLogProbFunction", None)
    if kernel is None:
        pytest.skip("TRL's kernels do not import here (no Triton: the CPU stack)")
    used = Path(inspect.getsourcefile(kernel)).as_posix().split("site-packages/")[-1]
    named = set(re.findall(r"trl/kernels/\w+\.py", capstone.__doc__))
    assert named == {used}, (named, used)
