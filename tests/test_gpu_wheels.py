"""The GPU-only facts L7.2 and its rehearsal rely on, read from the pinned GPU wheels (issue 22).

No GPU runs in CI and the GPU stack cannot be installed beside the CPU one, so these tests fetch the pinned
wheels of ``requirements-gpu.txt`` without their dependencies (``labs.training.pinned_api``: ``pip download
--no-deps`` into ``<course cache>/wheels``, reused when present; the vLLM wheel is ~320 MB once) and read
their source. Where a piece of Unsloth's, unsloth-zoo's or vLLM's code is pure Python, the test runs that
code itself, compiled from the wheel, instead of restating it:

1. TRL 1.15 adds a second adapter ``"ref"`` to a model that is already a PEFT model when ``beta != 0``;
   Unsloth's own ``__init__`` rewrite (``patch_functions``) leaves that block in place; unsloth-zoo's key
   filter plus vLLM 0.31's LoRA name parser then reject the ``"ref"`` tensors, and accept them once
   ``labs.l72.drop_reference_adapter`` ran, which L7.2's trainer always calls.
2. Unsloth builds its vLLM engine with ``max_logprobs=0``; vLLM 0.31's own validation accepts every
   log-probability request the course makes.
3. Every default Unsloth's ``GRPOConfig`` wrapper swaps is pinned to TRL's value by L7.2's config, or is
   listed in ``labs.l72.SWAPS_WITHOUT_EFFECT`` with the reason it changes nothing.

Offline (pip cannot fetch a wheel that is not cached yet) every test SKIPS and says which wheel and why.
"""

from __future__ import annotations

import ast
import re
import textwrap
from pathlib import Path
from types import SimpleNamespace

import pytest

from labs import l72
from labs.core.profiles import get_profile
from labs.training import pinned_api as pa

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parent.parent
RTX = get_profile("rtx5090")
REF_BLOCK_TEST = "is_peft_model(model) and args.beta != 0.0"


def _source(dist: str, path: str, stack: str = "gpu") -> str:
    version = pa.pinned_version(dist, stack)
    try:
        return pa.wheel_source(dist, version, path)
    except pa.WheelUnavailable as exc:
        pytest.skip(f"{dist}=={version} is not in the cache ({pa.wheel_dir()}) and pip could not fetch it: {exc}")


def _function(tree: ast.AST, name: str) -> ast.FunctionDef:
    return next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == name)


def _class(tree: ast.Module, name: str) -> ast.ClassDef:
    return next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == name)


# --------------------------------------------------------------------------------------------------
# 1. TRL's "ref" adapter, Unsloth's rewrite that misses it, and the course's fix
# --------------------------------------------------------------------------------------------------


def _grpo_init(stack: str) -> tuple[str, ast.FunctionDef]:
    """``GRPOTrainer.__init__`` as ``inspect.getsource`` returns it (what Unsloth rewrites), and its node."""
    source = _source("trl", "trl/trainer/grpo_trainer.py", stack)
    init = _function(_class(ast.parse(source), "GRPOTrainer"), "__init__")
    start = min([init.lineno, *(d.lineno for d in init.decorator_list)])
    return "".join(source.splitlines(keepends=True)[start - 1:init.end_lineno]), init


def _ref_block(init: ast.FunctionDef) -> ast.If:
    return next(n for n in ast.walk(init) if isinstance(n, ast.If) and ast.unparse(n.test) == REF_BLOCK_TEST)


def _adds_ref(node: ast.AST) -> bool:
    return any(isinstance(n, ast.Call) and ast.unparse(n.func) == "model.add_adapter"
               and ast.unparse(n.args[0]) == "'ref'" for n in ast.walk(node))


def _unsloth_init_rewrite():
    """The statements of Unsloth's ``patch_functions`` that rewrite ``__init__`` up to the "ref" pattern."""
    source = _source("unsloth", "unsloth/models/rl.py")
    body = _function(ast.parse(source), "patch_functions").body
    first = next(i for i, s in enumerate(body) if ast.unparse(s) == "old_init = init")
    last = next(i for i, s in enumerate(body) if ast.unparse(s).startswith("init = re.sub(add_adapter_block_pattern"))
    code = compile(ast.Module(body=body[first:last + 1], type_ignores=[]), "unsloth/models/rl.py", "exec")

    def rewrite(init_source: str) -> tuple[str, str]:
        namespace = {"init": init_source, "re": re}
        exec(code, namespace)  # noqa: S102 - the pinned wheel's own code, nothing else
        return namespace["init"], namespace["add_adapter_block_pattern"]

    return rewrite, source


def test_trl_115_adds_a_ref_adapter_to_a_peft_model_when_beta_is_not_zero():
    _, init = _grpo_init("gpu")
    block = _ref_block(init)
    assert _adds_ref(block), f"trl {pa.pinned_version('trl', 'gpu')}: no add_adapter('ref') under `{REF_BLOCK_TEST}`"
    print(f"trl {pa.pinned_version('trl', 'gpu')} grpo_trainer.py:{block.lineno}: elif {REF_BLOCK_TEST}")
    assert RTX.beta != 0.0 and l72.get_peft_model_kwargs(RTX)  # L7.2 hands TRL a PEFT model, with beta != 0
    # CI's TRL has the same block, so tests/test_unsloth_lab.py's real GRPOTrainer exercises it.
    _, cpu_init = _grpo_init("cpu")
    assert ast.dump(_ref_block(cpu_init)) == ast.dump(block)


def test_unsloths_own_rewrite_leaves_trl_115s_ref_block_in_place():
    rewrite, rl_source = _unsloth_init_rewrite()
    init_source, _ = _grpo_init("gpu")
    rewritten, pattern = rewrite(init_source)
    assert re.search(pattern, init_source, flags=re.DOTALL) is None  # the pattern matches nothing in TRL 1.15
    tree = ast.parse(textwrap.dedent(rewritten))  # still valid Python
    assert _adds_ref(_ref_block(tree)), "Unsloth's rewrite removed TRL's 'ref' block: drop_reference_adapter is moot"
    # Negative control: the older wording Unsloth expects is commented out by the same code.
    older = init_source.replace(f"elif {REF_BLOCK_TEST}:", f"if is_peft_available() and {REF_BLOCK_TEST}:")
    assert older != init_source
    commented, _ = rewrite(older)
    assert "# Unsloth: Commented out" in commented and not _adds_ref(ast.parse(textwrap.dedent(commented)))
    # No other Unsloth RL rewrite touches the adapter (the pattern above is the only place).
    lines = [i + 1 for i, line in enumerate(rl_source.splitlines()) if "add_adapter" in line]
    assert all(4090 < n < 4150 for n in lines), lines
    assert "add_adapter" not in _source("unsloth", "unsloth/models/rl_replacements.py")


def _zoo_lora_key_filter():
    """unsloth-zoo's ``{k.replace(".default", ""): v ...}`` from ``_build_lora_request``, as a function of items."""
    build = _function(ast.parse(_source("unsloth-zoo", "unsloth_zoo/vllm_utils.py")), "_build_lora_request")
    comp = next(n.value for n in ast.walk(build) if isinstance(n, ast.Assign) and isinstance(n.value, ast.DictComp)
                and ".default" in ast.unparse(n.value))
    return eval(f"lambda items: {ast.unparse(comp)}")  # noqa: S307 - the pinned wheel's expression


def _vllm_lora_name_parser():
    source = _source("vllm", "vllm/lora/utils.py")
    node = _function(ast.parse(source), "parse_fine_tuned_lora_name")
    namespace: dict = {"WeightsMapper": object}
    exec(compile(ast.Module(body=[node], type_ignores=[]), "vllm/lora/utils.py", "exec"), namespace)  # noqa: S102
    return namespace["parse_fine_tuned_lora_name"]


def test_vllm_rejects_the_ref_tensors_unsloth_sends_and_accepts_them_after_the_course_fix():
    from test_unsloth_lab import _add_trls_reference_adapter, _tiny_peft_model

    keys_of, parse = _zoo_lora_key_filter(), _vllm_lora_name_parser()
    model = _tiny_peft_model()
    _add_trls_reference_adapter(model)
    sent = keys_of(model.state_dict().items())
    assert any(".ref." in k for k in sent)
    with pytest.raises(ValueError, match="is unsupported LoRA weight"):
        for key in sent:
            parse(key)
    assert l72.drop_reference_adapter(model, show=lambda _: None)
    sent = keys_of(model.state_dict().items())
    assert sent and all(parse(key)[0] for key in sent)


def test_l72s_trainer_always_drops_the_reference_adapter():
    # Both L7.2 paths build their trainer with labs.l72.trainer.make_trainer (tests/test_unsloth_lab.py runs it).
    trainer_py = ast.parse((REPO / "labs/l72/trainer.py").read_text())
    calls = lambda fn: {ast.unparse(n.func) for n in ast.walk(_function(trainer_py, fn)) if isinstance(n, ast.Call)}  # noqa: E731
    assert "prepare_trainer" in calls("make_trainer") and "drop_reference_adapter" in calls("prepare_trainer")
    for path, fn in (("labs/l72/gpu.py", "start_unsloth_run"), ("labs/l72/fallback.py", "build_trainer")):
        called = {ast.unparse(n.func) for n in ast.walk(_function(ast.parse((REPO / path).read_text()), fn))
                  if isinstance(n, ast.Call)}
        assert "l72_trainer.make_trainer" in called, path


# --------------------------------------------------------------------------------------------------
# 2. Unsloth's engine allows no log-probabilities beyond the sampled token's
# --------------------------------------------------------------------------------------------------


def test_unsloths_engine_is_built_with_max_logprobs_zero():
    load_vllm = _function(ast.parse(_source("unsloth-zoo", "unsloth_zoo/vllm_utils.py")), "load_vllm")
    args = load_vllm.args
    defaults = dict(zip([a.arg for a in args.args][-len(args.defaults):], args.defaults))
    assert ast.literal_eval(defaults["max_logprobs"]) == 0
    passed = [kw for n in ast.walk(load_vllm) if isinstance(n, ast.Call) and ast.unparse(n.func) == "dict"
              for kw in n.keywords if kw.arg == "max_logprobs"]
    assert [ast.unparse(kw.value) for kw in passed] == ["max_logprobs"]  # engine_args = dict(..., max_logprobs=...)
    print(f"unsloth_zoo vllm_utils.py:{load_vllm.lineno} load_vllm(max_logprobs=0) -> engine_args line "
          f"{passed[0].value.lineno}")
    # Unsloth's loader forwards a from_pretrained keyword named like a load_vllm argument; the course passes none.
    assert "max_logprobs" not in l72.from_pretrained_kwargs(RTX)
    llama = _source("unsloth", "unsloth/models/llama.py")
    assert "allowed_args = inspect.getfullargspec(load_vllm).args" in llama


def _vllm_logprob_validation():
    """vLLM 0.31's ``SamplingParams._validate_logprobs``, compiled from the wheel."""
    source = _source("vllm", "vllm/sampling_params.py")
    node = _function(_class(ast.parse(source), "SamplingParams"), "_validate_logprobs")

    class VLLMValidationError(ValueError):
        def __init__(self, message, **_):
            super().__init__(message)

    namespace = {"VLLMValidationError": VLLMValidationError, "ModelConfig": object, "MAX_LOGPROB_TOKEN_IDS": 0}
    exec(compile(ast.Module(body=[node], type_ignores=[]), "vllm/sampling_params.py", "exec"), namespace)  # noqa: S102
    # every SamplingParams field the method reads (None unless a request sets it)
    fields = {n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute) and ast.unparse(n.value) == "self"}
    return namespace["_validate_logprobs"], fields


def _course_logprob_requests() -> list[tuple[str, str, int]]:
    """``(file, keyword, value)`` of every logprobs/prompt_logprobs the course's SamplingParams(...) calls ask."""
    import importlib

    found = []
    for path in sorted((REPO / "labs").rglob("*.py")):
        tree = ast.parse(path.read_text())
        for call in (n for n in ast.walk(tree) if isinstance(n, ast.Call) and ast.unparse(n.func) == "SamplingParams"):
            for kw in call.keywords:
                if kw.arg in ("logprobs", "prompt_logprobs"):
                    try:
                        value = ast.literal_eval(kw.value)
                    except ValueError:  # a module constant
                        module = importlib.import_module(".".join(path.relative_to(REPO).with_suffix("").parts))
                        value = getattr(module, ast.unparse(kw.value))
                    found.append((str(path.relative_to(REPO)), kw.arg, value))
    return found


def test_vllm_accepts_every_log_probability_request_of_the_course_on_unsloths_engine():
    validate, fields = _vllm_logprob_validation()
    engine = SimpleNamespace(max_logprobs=0, get_vocab_size=lambda: 151_936)
    assert {"logprobs", "prompt_logprobs"} <= fields

    def asks(**kw):
        return SimpleNamespace(**{**dict.fromkeys(fields), **kw})

    with pytest.raises(ValueError, match="greater than max allowed: 0"):
        validate(asks(logprobs=1), engine)  # what the rehearsal's probe asked before issue 22
    requests = _course_logprob_requests()
    assert any(f.endswith("unsloth_part.py") for f, _, _ in requests), requests
    for file, key, value in requests:
        validate(asks(**{key: value}), engine)  # raises if any asks more than 0
    from labs.rehearsal.unsloth_part import probe_params

    params = probe_params()
    validate(asks(logprobs=params.logprobs, prompt_logprobs=params.prompt_logprobs), engine)


# --------------------------------------------------------------------------------------------------
# 3. Unsloth's GRPOConfig defaults against TRL's, and the course's values
# --------------------------------------------------------------------------------------------------


def _literal_or_expr(node):
    try:
        return ast.literal_eval(node)
    except ValueError:
        return ("expr", ast.unparse(node))


def _field_defaults(source: str, class_name: str) -> dict:
    out = {}
    for stmt in _class(ast.parse(source), class_name).body:
        if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.value is not None:
            value = stmt.value
            if isinstance(value, ast.Call) and ast.unparse(value.func) == "field":
                value = next((k.value for k in value.keywords if k.arg == "default"), None)
            if value is not None:
                out[stmt.target.id] = _literal_or_expr(value)
    return out


def _trl_defaults() -> dict:
    """TRL 1.15's GRPOConfig defaults, through _BaseConfig down to transformers 5.17's TrainingArguments."""
    training_args = _source("transformers", "transformers/training_args.py")
    defaults = _field_defaults(training_args, "TrainingArguments")
    defaults.update(_field_defaults(_source("trl", "trl/trainer/base_config.py"), "_BaseConfig"))
    defaults.update(_field_defaults(_source("trl", "trl/trainer/grpo_config.py"), "GRPOConfig"))
    # optim's default is a class-body variable: adamw_torch, or adamw_torch_fused with torch >= 2.8
    assert defaults["optim"] == ("expr", "default_optim")
    assigned = {ast.literal_eval(n.value) for n in ast.walk(_class(ast.parse(training_args), "TrainingArguments"))
                if isinstance(n, ast.Assign) and ast.unparse(n.targets[0]) == "default_optim"}
    assert assigned == {"adamw_torch", "adamw_torch_fused"} and "is_torch_greater_or_equal_than_2_8" in training_args
    torch_version = tuple(int(x) for x in pa.pinned_version("torch", "gpu").split(".")[:2])
    defaults["optim"] = "adamw_torch_fused" if torch_version >= (2, 8) else "adamw_torch"
    return defaults


def _unsloth_swaps() -> tuple[dict, str]:
    """Unsloth's replacement defaults for a GRPO config (all trainers', then GRPO's), and rl.py's source."""
    source = _source("unsloth", "unsloth/models/rl.py")
    tree = ast.parse(source)
    dicts = [n for n in ast.walk(tree) if isinstance(n, ast.Assign) and ast.unparse(n.targets[0]) == "replacements"
             and isinstance(n.value, ast.Dict)]
    general = next(d for d in dicts if "optim" in ast.unparse(d.value))
    grpo = next(d for d in dicts if "mask_truncated_completions" in ast.unparse(d.value))
    swaps = ast.literal_eval(general.value)
    warmup = [n for n in ast.walk(tree) if isinstance(n, ast.Assign)
              and ast.unparse(n.targets[0]) in ("replacements['warmup_steps']", "replacements['warmup_ratio']")]
    assert [ast.unparse(w.targets[0]) for w in warmup] == ["replacements['warmup_steps']", "replacements['warmup_ratio']"]
    swaps["warmup_steps"] = ast.literal_eval(warmup[0].value)  # transformers >= 5 (5.17 is pinned)
    swaps.update(ast.literal_eval(grpo.value))
    return swaps, source


def unpinned_swaps(kwargs: dict, swaps: dict, trl: dict) -> list[str]:
    """Swaps of a GRPOConfig field that change TRL's default and that ``kwargs`` leave to Unsloth."""
    return sorted(k for k, v in swaps.items()
                  if k in trl and k not in kwargs and v != trl[k] and k not in l72.SWAPS_WITHOUT_EFFECT)


def test_every_unsloth_config_swap_is_pinned_to_trls_value_or_changes_nothing():
    swaps, rl_source = _unsloth_swaps()
    trl = _trl_defaults()
    print({k: (v, trl.get(k, "not a field")) for k, v in swaps.items()})
    kwargs = l72.grpo_config_kwargs(RTX, "out")
    assert unpinned_swaps(kwargs, swaps, trl) == []
    # negative control: without the course's pins the check names them
    bare = {k: v for k, v in kwargs.items() if k not in l72.COURSE_VALUES}
    assert {"optim", "weight_decay", "warmup_steps"} <= set(unpinned_swaps(bare, swaps, trl))
    assert (swaps["optim"], swaps["weight_decay"], swaps["warmup_steps"]) == ("adamw_8bit", 0.001, 0.1)
    # the course's pins are TRL 1.15's own defaults: L7.2 trains what L7.1 trains
    for key, value in l72.COURSE_VALUES.items():
        expected = trl["epsilon"] if key == "epsilon_high" else trl[key]  # TRL: epsilon_high None = epsilon
        assert value == expected, (key, value, expected)
    assert trl["epsilon_high"] is None
    trainer_source = _source("trl", "trl/trainer/grpo_trainer.py")
    assert "args.epsilon_high if args.epsilon_high is not None else args.epsilon" in trainer_source
    # each "without effect" entry is a real swap, not a stale name
    for key in l72.SWAPS_WITHOUT_EFFECT:
        assert key in swaps and swaps[key] != trl.get(key), key


def test_an_explicit_dapo_makes_unsloth_overwrite_none_so_the_course_passes_values():
    _, rl_source = _unsloth_swaps()
    dapo = rl_source[rl_source.index("elif loss_type.lower() == 'dapo' and not _unsloth_default_loss_type"):]
    dapo = dapo[:dapo.index("elif loss_type.lower() == 'cispo'")]
    assert "mask_truncated_completions = True" in dapo and "epsilon_high = 0.28" in dapo
    kwargs = l72.grpo_config_kwargs(RTX, "out")
    assert kwargs["loss_type"] == "dapo"
    assert kwargs["mask_truncated_completions"] is False and kwargs["epsilon_high"] is not None
    assert kwargs["beta"] is not None  # Unsloth turns beta=None into 0.0 for dapo


def test_unsloths_batch_rule_and_router_default_leave_the_rtx5090_recipe_alone():
    rl_replacements = _source("unsloth", "unsloth/models/rl_replacements.py")
    assert "per_device_train_batch_size = num_generations" in rl_replacements
    assert RTX.per_device_train_batch_size % RTX.num_generations == 0  # Unsloth's batch-size rule does not fire
    # router_aux_loss_coef: TRL's None resolves to the config's coefficient, 0.0 for a model without a router
    trainer_source = _source("trl", "trl/trainer/grpo_trainer.py")
    assert 'getattr(text_config, "router_aux_loss_coef", 0.0) if coef is None else coef' in trainer_source
    qwen3 = _source("transformers", "transformers/models/qwen3/configuration_qwen3.py")
    assert "router_aux_loss_coef" not in qwen3 and "output_router_logits" not in qwen3


def test_every_l72_config_keyword_exists_in_both_trl_releases():
    kwargs = l72.grpo_config_kwargs(RTX, "out")
    for stack in ("gpu", "cpu"):
        try:
            fields = pa.grpo_config_fields(pa.pinned_version("trl", stack), pa.pinned_version("transformers", stack))
        except pa.WheelUnavailable as exc:
            pytest.skip(f"TRL/transformers wheels of the {stack} stack unavailable: {exc}")
        assert pa.unknown_keywords(kwargs, fields) == [], stack


def test_unsloth_turns_dr_grpos_group_scaling_off_as_l72s_rule_records():
    """Issue 51: a student's recipe with loss_type='dr_grpo' keeps TRL's scale_rewards='group' on L7.1, and Unsloth
    overwrites it on L7.2 whatever is passed; ``labs.l72.recipe_rule.record`` states that change instead of hiding it."""
    from labs.l72 import recipe_rule

    _, rl_source = _unsloth_swaps()
    branch = rl_source[rl_source.index("if loss_type.lower() == 'dr_grpo':\\n\"\n            \"    if scale_rewards == None"):]
    branch = branch[:branch.index("elif loss_type.lower() == 'dapo'")]
    assert "scale_rewards == True or scale_rewards == 'group'" in branch and "scale_rewards = False" in branch
    record = recipe_rule.record(RTX.replace(loss_type="dr_grpo"), [], RTX.replace(loss_type="dr_grpo"))
    assert record["changes"]["scale_rewards"] == {**record["changes"]["scale_rewards"], "receta": "group", "l72": "none"}
