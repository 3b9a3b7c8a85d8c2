"""labs.exercises: fluency measures on hand-made text, curve statistics with known answers, the variants the
student builds (saved, read back by the sweep) and the course's plan of them, and the comparisons on synthetic run
folders."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from rundirs import e2_run, good_run, history, make_run

from labs import exercises as ex
from labs.core.profiles import PROFILES, get_profile
from labs.core.runfolder import write_jsonl

# ----------------------------------------------------------------------------------- fluency measures


def test_words_split_words_and_punctuation_lowercased():
    assert ex.words("Hola, Mundo!  <answer>18</answer>") == [
        "hola", ",", "mundo", "!", "<", "answer", ">", "18", "<", "/", "answer", ">"
    ]


def test_repetition_rate_known_values():
    assert ex.repetition_rate("uno dos tres cuatro cinco") == 0.0
    # trigrams: (a b c) (b c a) (c a b) (a b c): 4 trigrams, 3 distinct
    assert ex.repetition_rate("a b c a b c") == pytest.approx(0.25)
    # a loop of one word: 4 trigrams, all the same
    assert ex.repetition_rate("x x x x x x") == pytest.approx(0.75)
    assert ex.repetition_rate("a b c a b c", n=1) == pytest.approx(0.5)
    assert ex.repetition_rate("dos palabras") is None  # fewer words than n


def test_distinct_n_pools_the_answers():
    texts = ["a b", "a c"]
    assert ex.distinct_n(texts, 1) == pytest.approx(3 / 4)  # a, b, a, c
    assert ex.distinct_n(texts, 2) == pytest.approx(1.0)  # (a b), (a c)
    assert ex.distinct_n(["a b", "a b"], 2) == pytest.approx(0.5)
    assert ex.distinct_n(["", "   "], 1) is None
    with pytest.raises(ValueError):
        ex.ngrams(["a"], 0)


def test_fluency_summary_tells_a_loop_from_a_sentence():
    loop = ["<answer> <answer> <answer> <answer> <answer> <answer>"] * 2
    prose = ["Juan tiene tres manzanas y compra dos más.", "Entonces tiene cinco manzanas en total."]
    f_loop, f_prose = ex.fluency(loop), ex.fluency(prose)
    assert f_loop["repetition"] > 0.5 and f_prose["repetition"] == 0.0
    assert f_loop["distinct_1"] < f_prose["distinct_1"]
    assert f_loop["distinct_2"] < f_prose["distinct_2"]


def test_k3_matches_trl_formula():
    same = np.array([-1.0, -2.0])
    assert np.allclose(ex.k3_per_token(same, same), 0.0)
    # ref - logp = ln 2: exp(ln 2) - ln 2 - 1 = 1 - ln 2
    assert ex.k3_per_token(np.array([0.0]), np.array([math.log(2)]))[0] == pytest.approx(1 - math.log(2))
    assert (ex.k3_per_token(np.array([-3.0, 0.0]), np.array([0.0, -3.0])) > 0).all()


class FakeScorer:
    """token_logprobs from a table, to check the arithmetic of perplexity and the KL estimate."""

    def __init__(self, table):
        self.table = table

    def token_logprobs(self, prompt, completion):
        return np.asarray(self.table[completion], dtype=float)


def test_perplexity_is_token_weighted():
    scorer = FakeScorer({"a": [-1.0], "b": [-2.0, -3.0, -4.0], "": []})
    p = ex.perplexity(scorer, [("p", "a"), ("p", "b"), ("p", "")])
    assert p["tokens"] == 4 and p["completions"] == 2
    assert p["nll"] == pytest.approx(10 / 4)  # not the mean of per-answer means (1 and 3)
    assert p["perplexity"] == pytest.approx(math.exp(2.5))
    assert ex.perplexity(scorer, [("p", "")])["perplexity"] is None


def test_kl_estimate_averages_k3_over_tokens():
    policy = FakeScorer({"a": [0.0, 0.0]})
    reference = FakeScorer({"a": [math.log(2), 0.0]})
    assert ex.kl_estimate(policy, reference, [("p", "a")]) == pytest.approx((1 - math.log(2)) / 2)
    assert ex.kl_estimate(policy, policy, [("p", "a")]) == pytest.approx(0.0)


# ----------------------------------------------------------------------- a real (tiny) model's log-probs


@pytest.fixture(scope="module")
def tiny_model_dir(tmp_path_factory):
    """A randomly initialised 1-layer Llama with a word-level tokenizer and a chat template."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from tokenizers import Tokenizer, models, pre_tokenizers

    vocab_words = ["[UNK]", "[PAD]", "<|user|>", "<|assistant|>", "hola", "mundo", "dos", "más", "son", "cuatro", "."]
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(vocab_words)}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    fast = transformers.PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]")
    fast.chat_template = "{% for m in messages %}<|{{ m['role'] }}|> {{ m['content'] }} {% endfor %}<|assistant|>"
    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        vocab_size=len(vocab_words), hidden_size=16, intermediate_size=32, num_hidden_layers=1,
        num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=64,
    )
    model = transformers.LlamaForCausalLM(config)
    path = tmp_path_factory.mktemp("tiny")
    model.save_pretrained(path)
    fast.save_pretrained(path)
    return path


def test_token_logprobs_agree_with_the_model_loss_on_the_completion(tiny_model_dir):
    torch = pytest.importorskip("torch")
    scorer = ex.LogProbScorer(str(tiny_model_dir), device="cpu")
    prompt = [{"role": "user", "content": "dos más dos"}]
    completion = "son cuatro ."
    lp = scorer.token_logprobs(prompt, completion)
    assert lp.shape == (3,) and (lp < 0).all()
    # Same quantity by another route: the model's own cross-entropy with the prompt masked out.
    tok = scorer.tokenizer
    prompt_ids = tok(tok.apply_chat_template(prompt, tokenize=False, add_generation_prompt=True), add_special_tokens=False)["input_ids"]
    ids = prompt_ids + tok(completion, add_special_tokens=False)["input_ids"]
    labels = [-100] * len(prompt_ids) + ids[len(prompt_ids):]
    with torch.no_grad():
        loss = scorer.model(input_ids=torch.tensor([ids]), labels=torch.tensor([labels])).loss.item()
    assert -lp.mean() == pytest.approx(loss, rel=1e-5)
    # the model scored against itself has KL 0; perplexity is exp of that loss
    assert ex.kl_estimate(scorer, scorer, [(prompt, completion)]) == pytest.approx(0.0, abs=1e-6)
    assert ex.perplexity(scorer, [(prompt, completion)])["perplexity"] == pytest.approx(math.exp(loss), rel=1e-5)
    assert len(scorer.token_logprobs(prompt, "")) == 0


# ---------------------------------------------------------------------------------- curve statistics


def test_curve_spread_known_value_and_trend_removed():
    # values 0, 1, 0: least-squares line y = 1/3, residuals -1/3, 2/3, -1/3; SS = 2/3 over n - 2 = 1
    assert ex.curve_spread([0, 1, 0]) == pytest.approx(math.sqrt(2 / 3))
    assert ex.curve_spread([1.0, 3.0, 5.0, 7.0]) == pytest.approx(0.0, abs=1e-12)
    rng = np.random.default_rng(0)
    noise = rng.normal(0, 0.3, 50)
    steps = np.arange(1, 51)
    assert ex.curve_spread(noise + 0.2 * steps, steps) == pytest.approx(ex.curve_spread(noise, steps))
    assert ex.curve_spread([1.0, None, 2.0]) is None  # two finite values leave no residual


def test_steps_to_threshold_uses_the_smoothed_curve():
    # EMA (alpha 0.1, bias-corrected) of 0, 0, 1, 1, 1: 0, 0, 0.369, 0.552, ...: crosses 0.5 at step 4
    assert ex.steps_to_threshold([0, 0, 1, 1, 1], [1, 2, 3, 4, 5], 0.5) == 4
    assert ex.steps_to_threshold([0, 0, 1, 1, 1], [10, 20, 30, 40, 50], 0.5) == 40
    assert ex.steps_to_threshold([0, 0, 0], [1, 2, 3], 0.5) is None
    assert ex.steps_to_threshold([0, 1], [1, 2], None) is None


def test_shared_threshold_is_halfway_from_worst_start_to_best_end():
    assert ex.shared_threshold([[0, 0, 0], [2, 2, 2]]) == pytest.approx(1.0)
    assert ex.shared_threshold([[0, 0, 0], [2, 2, 2]], fraction=0.25) == pytest.approx(0.5)
    assert ex.shared_threshold([[1, 1], [1, 1]]) is None  # nobody improved
    assert ex.shared_threshold([]) is None


def test_mean_std_ignores_missing_values():
    assert ex.mean_std([1.0, None, 3.0, float("nan")]) == (pytest.approx(2.0), pytest.approx(math.sqrt(2)))
    assert ex.mean_std([5.0]) == (5.0, None)
    assert ex.mean_std([]) == (None, None)


# ------------------------------------------------------------------- the variants the student builds


def perfil_con_grupo(perfil, G):
    """A right E1 answer (the notebook's checks pass it): the largest micro-batch that divides both."""
    answers = perfil.prompts_per_step * G
    micro = max(d for d in range(1, perfil.per_device_train_batch_size + 1)
                if answers % d == 0 and perfil.per_device_train_batch_size % d == 0)
    return perfil.replace(num_generations=G, per_device_train_batch_size=micro, gradient_accumulation_steps=answers // micro)


def recompensas_sin_correccion(recompensas):
    return [n for n in recompensas if "correctness" not in n]


def perfil_con_beta(perfil, beta):
    return perfil.replace(beta=beta)


def built(name, root, budget=None):
    return (ex.e1_variants(name, perfil_con_grupo, root, budget) + ex.e2_variants(name, recompensas_sin_correccion, root, budget)
            + ex.e3_variants(name, perfil_con_beta, root, budget))


@pytest.mark.parametrize("name", sorted(PROFILES))
def test_every_variant_name_carries_its_profile(name, tmp_path):
    planned = [v for e in ("E1", "E2", "E3") for v in ex.planned_variants(e, name, tmp_path)]
    for v in planned + built(name, tmp_path):
        assert name in v.name
        assert v.name.startswith(("e1-", "e2-", "e3-", "ref-"))


@pytest.mark.parametrize("name", sorted(PROFILES))
def test_what_the_student_builds_is_saved_and_is_what_the_sweep_reads(name, tmp_path):
    for exercise, build, function in (("E1", ex.e1_variants, perfil_con_grupo), ("E2", ex.e2_variants, recompensas_sin_correccion),
                                      ("E3", ex.e3_variants, perfil_con_beta)):
        mine = build(name, function, tmp_path)
        assert ex.saved_variants(exercise, name, tmp_path) == mine
        assert all(v.built_by.startswith(ex.student.FUNCTIONS[exercise]) for v in mine if v.lab == exercise)
        # the course's plan has the same runs (names, G, beta); what trains is what the student built
        planned = ex.planned_variants(exercise, name, tmp_path)
        assert [v.name for v in planned] == [v.name for v in mine]
        p = get_profile(name)
        assert [(v.profile(p).num_generations, v.profile(p).prompts_per_step, v.profile(p).beta) for v in planned] == [
            (v.profile(p).num_generations, v.profile(p).prompts_per_step, v.profile(p).beta) for v in mine]


def test_the_sweep_trains_another_answer_when_the_student_writes_another(tmp_path):
    """Nothing in labs/ decides the batch split: a different (also whole-group) answer is what is saved and run."""
    def one_answer_per_micro_batch(perfil, G):
        return perfil.replace(num_generations=G, per_device_train_batch_size=1,
                              gradient_accumulation_steps=perfil.prompts_per_step * G)

    gpu = get_profile("rtx5090")
    ex.e1_variants(gpu, one_answer_per_micro_batch, tmp_path)
    saved = ex.saved_variants("E1", gpu, tmp_path)
    assert [v.profile(gpu).per_device_train_batch_size for v in saved] == [1, 1]
    assert [v.profile(gpu).gradient_accumulation_steps for v in saved] == [16, 64]
    command = ex.sweep.lab_command(saved[0], gpu.name)
    assert "per_device_train_batch_size=1" in command and "gradient_accumulation_steps=16" in command
    assert command[command.index("--variante-de") + 1].startswith("perfil_con_grupo (cuaderno E1;")


def test_nothing_saved_says_which_notebook_exercise_to_finish(tmp_path):
    with pytest.raises(ex.sweep.SweepError) as err:
        ex.saved_variants("E2", "ci", tmp_path)
    text = str(err.value)
    assert "notebooks/E2_reward_hacking.ipynb" in text and "«tu variante: las recompensas sin corrección» (E2)" in text
    with pytest.raises(ex.sweep.SweepError, match="debe devolver un perfil"):
        ex.e1_variants("ci", lambda perfil, G: {"num_generations": G}, tmp_path)


def test_an_unwritten_variant_function_is_named_instead_of_a_traceback(capsys):
    assert ex.ejercicios_hechos(perfil_con_grupo, recompensas_sin_correccion, perfil_con_beta)
    assert capsys.readouterr().out == ""

    def stub(perfil, beta):  # otter's stub: a body of `...`
        ...

    stub.__name__ = "perfil_con_beta"
    assert not ex.ejercicios_hechos(perfil_con_grupo, stub)
    out = capsys.readouterr().out
    assert "`perfil_con_beta` aún no está escrita" in out and "«tus variantes: el peso de la KL» (E3)" in out
    assert "perfil_con_grupo" not in out and "Traceback" not in out


def test_ci_shares_the_reference_only_where_settings_are_identical(tmp_path):
    ci = get_profile("ci")
    e1 = ex.e1_variants(ci, perfil_con_grupo, tmp_path)
    assert [v.profile(ci).num_generations for v in e1] == [2, 4]
    assert e1[0].name == "e1-ci-g2" and e1[1].name == "ref-ci"  # ci's own G is 4: G=4 is the recipe
    e3 = {v.profile(ci).beta: v for v in ex.e3_variants(ci, perfil_con_beta, tmp_path)}
    assert sorted(e3) == [0.0, 0.04]  # 0.2 adds no code path to the smoke test
    assert e3[0.04].name == "ref-ci" and e3[0.0].name == "e3-ci-beta0"
    control, only_format = ex.e2_variants(ci, recompensas_sin_correccion, tmp_path)
    assert control.name == "ref-ci" and control.rewards is None
    assert only_format.rewards == ("format_reward", "soft_format_reward")
    for v in e1 + list(e3.values()) + [control, only_format]:
        p = v.profile(ci)
        assert (p.max_steps, p.eval_size, p.train_size) == (ci.max_steps, ci.eval_size, ci.train_size)
        assert p.generation_batch_size // p.num_generations == ci.prompts_per_step  # same prompts per step
    # every shared name trains exactly the same thing wherever it appears
    ref = ex.reference_variant(ci, tmp_path)
    for v in e1 + list(e3.values()) + [control]:
        if v.name == ref.name:
            assert ex.same_settings(v, ref, ci)


def test_rtx5090_keeps_the_lesson_group_sizes_on_the_exercises_budget(tmp_path):
    gpu = get_profile("rtx5090")
    e1 = ex.e1_variants(gpu, perfil_con_grupo, tmp_path)
    assert [v.profile(gpu).num_generations for v in e1] == list(ex.LESSON_GROUP_SIZES)
    assert all(v.name != "ref-rtx5090" for v in e1)  # the recipe's G is 8: nothing to share
    assert all(v.profile(gpu).max_steps == ex.BUDGETS["rtx5090"]["max_steps"] < gpu.max_steps for v in e1)
    cpu = get_profile("cpu")
    assert [v.profile(cpu).num_generations for v in ex.e1_variants(cpu, perfil_con_grupo, tmp_path)] == [4, 16]
    for p in (cpu, gpu):
        assert [v.profile(p).beta for v in ex.e3_variants(p, perfil_con_beta, tmp_path)] == [0.0, 0.04, 0.2]
    assert [v.name for v in ex.e3_variants(cpu, perfil_con_beta, tmp_path)] == ["e3-cpu-beta0", "ref-cpu", "e3-cpu-beta0.2"]


def test_reference_reuses_a_finished_l71_run_only_with_identical_settings(tmp_path, monkeypatch):
    monkeypatch.setenv("COURSE_RUNS", str(tmp_path))  # no saved recipe but this test's: the course's is the recipe
    gpu = get_profile("rtx5090")
    lesson = {"max_steps": gpu.max_steps}  # the exercises on the lab's own budget: the L7.1 run can be the reference
    assert ex.reference_variant(gpu, tmp_path, lesson).name == "ref-rtx5090"  # nothing finished yet
    other = make_run(tmp_path, "l71-rtx5090", profile="rtx5090", beta=0.1, max_steps=gpu.max_steps)
    assert ex.reference_variant(gpu, tmp_path, lesson).name == "ref-rtx5090"  # other settings: not the recipe
    same = make_run(tmp_path, "l71-notebook-rtx5090", profile="rtx5090", max_steps=gpu.max_steps)
    ref = ex.reference_variant(gpu, tmp_path, lesson)
    assert ref.name == "l71-notebook-rtx5090" and "L7.1" in ref.label
    assert ex.reference_variant(gpu, tmp_path).name == "ref-rtx5090"  # the default budget is not the lab's
    assert [v.name for v in ex.e3_variants(gpu, perfil_con_beta, tmp_path, lesson)] == ["e3-rtx5090-beta0", "l71-notebook-rtx5090", "e3-rtx5090-beta0.2"]
    assert ex.e2_variants(gpu, recompensas_sin_correccion, tmp_path, lesson)[0].name == "l71-notebook-rtx5090"
    # a finished ref-<profile> folder wins, so the three notebooks keep agreeing
    make_run(tmp_path, "ref-rtx5090", profile="rtx5090", max_steps=gpu.max_steps)
    assert ex.reference_variant(gpu, tmp_path, lesson).name == "ref-rtx5090"
    # on ci the exercises' budget is the lab's: the L7.1 notebook's finished ci run is the reference, so
    # the test suite trains the recipe once
    assert ex.reference_variant("ci", tmp_path).name == "ref-ci"
    make_run(tmp_path, "l71-notebook-ci", profile="ci", max_steps=get_profile("ci").max_steps)
    assert ex.reference_variant("ci", tmp_path).name == "l71-notebook-ci"
    assert [v.name for v in ex.e1_variants("ci", perfil_con_grupo, tmp_path)] == ["e1-ci-g2", "l71-notebook-ci"]
    assert other.exists() and same.exists()


def test_budget_note_depends_on_the_profile():
    assert "PRUEBA DE HUMO" in ex.budget_note(get_profile("ci"))
    assert f"{get_profile('ci').max_steps} pasos" in ex.budget_note(get_profile("ci"))
    assert "HUMO" not in ex.budget_note(get_profile("rtx5090"))
    steps = ex.BUDGETS["rtx5090"]["max_steps"]
    assert f"{steps} pasos en lugar de los 500 de la lección" in ex.budget_note(get_profile("rtx5090"))
    assert "CPU" in ex.budget_note(get_profile("cpu"))


def test_settings_table_shows_the_batch_arithmetic(tmp_path):
    rows = ex.settings_table(ex.e1_variants("ci", perfil_con_grupo, tmp_path), "ci")
    assert [r["generation_batch_size"] for r in rows] == [2, 4]
    assert [r["prompts por paso"] for r in rows] == [1, 1]


# ----------------------------------------------------------------------- synthetic runs with completions

SYSTEM = {"role": "system", "content": "Resuelve el problema."}


def write_completions(root, step: int, groups: list[tuple[str, list[tuple[str, dict]]]]):
    """One TRL completions parquet: for each (question, [(text, rewards)]) the G rows of one group."""
    import pandas as pd

    rows = []
    for question, members in groups:
        for text, rewards in members:
            rows.append({
                "step": step,
                "prompt": [SYSTEM, {"role": "user", "content": question}],
                "completion": [{"role": "assistant", "content": text}],
                **rewards,
                "advantage": 0.0,
            })
    path = root / "checkpoints" / "completions" / f"completions_{step:05d}.parquet"
    path.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows).to_parquet(path)


def answer(n: int) -> str:
    return f"<think>Sumo los números.</think><answer>{n}</answer>"


def test_group_statistics_known_baseline_error(tmp_path):
    root = make_run(tmp_path, "g4-ci", profile="ci", metrics=history(4))
    # rewards [3, 1, 0, 3]: sample std 1.5, baseline standard error 1.5 / sqrt(4) = 0.75; [1, 1, 1, 1]: 0
    g1 = [("t", {"correctness_reward": r, "format_reward": 0.0, "soft_format_reward": 0.0}) for r in (3.0, 1.0, 0.0, 3.0)]
    g2 = [("t", {"correctness_reward": 0.5, "format_reward": 0.5, "soft_format_reward": 0.0})] * 4
    write_completions(root, 1, [("q1", g1), ("q2", g2)])
    g = ex.group_statistics(ex.load_run(root))
    assert g["groups"] == 2 and g["group_size"] == 4
    assert g["within_group_std"] == pytest.approx(0.75)
    assert g["baseline_se"] == pytest.approx(0.375)
    assert g["equal_reward_share"] == pytest.approx(0.5)


def test_e1_rows_on_synthetic_runs(tmp_path):
    small = history(40, correctness=(0.2, 1.0), noise=0.3, seed=1)
    large = history(40, correctness=(0.2, 1.6), noise=0.05, seed=2)
    for row in large:
        row["frac_reward_zero_std"] = 0.05
        row["step_time"] = 4.0
    for row in small:
        row["step_time"] = 1.0
    runs = [
        ex.load_run(make_run(tmp_path, "g4", metrics=small, profile="ci"), label="G=4"),
        ex.load_run(make_run(tmp_path, "g16", metrics=large, profile="ci"), label="G=16"),
    ]
    rows = ex.e1_rows(runs)
    small_row, large_row = rows
    assert small_row["reward_spread"] > large_row["reward_spread"]  # noisier curve, larger spread
    assert not {"zero_std_share", "grad_norm_mean", "grad_norm_std"} & set(small_row)  # the student's comparar_e1
    assert small_row["seconds_per_step"] == pytest.approx(1.0) and large_row["seconds_per_step"] == pytest.approx(4.0)
    assert small_row["threshold"] == large_row["threshold"]
    rewards = [r.series("reward") for r in runs]
    assert small_row["threshold"] == pytest.approx(ex.shared_threshold([s.values for s in rewards]))
    assert large_row["steps_to_threshold"] is not None
    assert large_row["seconds_to_threshold"] == pytest.approx(4.0 * large_row["steps_to_threshold"])
    assert small_row["baseline_se"] is None  # no completions logged in these folders
    frame = ex.table(rows, ex.E1_COLUMNS)
    assert list(frame.index) == ["G=4", "G=16"]


def test_training_correctness_scores_logged_completions(tmp_path):
    root = e2_run(tmp_path)
    golds = {"q1": "18", "q2": "7"}
    fmt_only = {"format_reward": 0.5, "soft_format_reward": 0.4}
    write_completions(root, 1, [("q1", [(answer(18), fmt_only), ("18", {})]), ("q2", [(answer(8), fmt_only), ("no sé", {})])])
    write_completions(root, 2, [("q1", [(answer(17), fmt_only)] * 2), ("q2", [(answer(6), fmt_only)] * 2)])
    rows = ex.training_correctness(ex.load_run(root), golds)
    assert [r["step"] for r in rows] == [1, 2]
    assert rows[0]["accuracy"] == pytest.approx(0.25) and rows[0]["format_rate"] == pytest.approx(0.5)
    assert rows[1]["accuracy"] == 0.0 and rows[1]["format_rate"] == 1.0


def test_e2_rows_use_the_diagnostics_detector(tmp_path):
    hacked = ex.load_run(e2_run(tmp_path), label="solo formato")
    control = ex.load_run(good_run(tmp_path), label="receta")
    rows = ex.e2_rows([control, hacked], golds={})
    by = {r["label"]: r for r in rows}
    assert by["solo formato"]["finding"].key == "format_hacking"
    assert by["solo formato"]["hacking"] is True
    assert by["receta"]["hacking"] is False
    assert not {"format_first", "format_last"} & set(by["receta"])  # the student's comparar_e2
    assert by["solo formato"]["correctness_reward_first"] is None  # not a reward in E2
    assert by["receta"]["correctness_reward_last"] > by["receta"]["correctness_reward_first"]
    assert by["solo formato"]["trained_accuracy"] < by["solo formato"]["base_accuracy"]
    assert by["solo formato"]["train_accuracy_first"] is None  # no completions logged here


def eval_record(i, gold, extracted, fmt_ok, completion, length=20):
    return {"id": f"gsm8k-test-{i:05d}", "gold": gold, "extracted": extracted, "correct": extracted == str(gold),
            "format_ok": fmt_ok, "length": length, "completion": completion}


def test_hacking_examples_prefer_formatted_wrong_answers(tmp_path):
    root = make_run(tmp_path, "e2-ci", profile="ci", metrics=history(4, correctness=None))
    base = [eval_record(0, 5, "5", False, "5"), eval_record(1, 7, "7", False, "7"), eval_record(2, 9, None, False, "??")]
    trained = [eval_record(0, 5, "5", True, answer(5)), eval_record(1, 7, "8", True, answer(8)), eval_record(2, 9, None, False, "??")]
    write_jsonl(root / "eval" / "base.jsonl", base)
    write_jsonl(root / "eval" / "trained.jsonl", trained)
    examples = ex.hacking_examples(ex.load_run(root), k=2)
    assert [e["id"] for e in examples] == ["gsm8k-test-00001", "gsm8k-test-00002"]
    first = examples[0]
    assert first["trained_format_ok"] and first["trained_extracted"] == "8" and first["gold"] == 7
    assert first["base_correct"] is True and first["base_extracted"] == "7"


def test_e3_rows_measure_text_and_read_kl(tmp_path):
    loop = "<answer> <answer> <answer> <answer> <answer> <answer>"
    prose = "Juan tiene tres manzanas y compra dos más, así que tiene cinco."
    runs = []
    for name, beta, text, log_kl in (("beta0-ci", 0.0, loop, False), ("beta0.2-ci", 0.2, prose, True)):
        root = make_run(tmp_path, name, profile="ci", beta=beta, metrics=history(12, log_kl=log_kl))
        write_jsonl(root / "eval" / "base.jsonl", [eval_record(i, 1, None, False, "uno dos tres cuatro", 30) for i in range(3)])
        write_jsonl(root / "eval" / "trained.jsonl", [eval_record(i, 1, None, False, text, 10 + i) for i in range(3)])
        runs.append(ex.load_run(root, label=f"beta={beta:g}"))
    rows = ex.e3_rows(runs, samples=2, measure_model=False)
    base, zero, high = rows
    assert base["label"] == "modelo base (antes de GRPO)"
    assert base["eval_length"] == pytest.approx(30.0) and base["repetition"] == 0.0
    assert zero["beta"] == 0.0 and zero["kl_logged_last"] is None  # TRL logs no KL with beta = 0
    assert high["kl_logged_last"] == pytest.approx(runs[1].series("kl").values[-1])
    assert not {"kl_logged_mean", "length_first", "length_last"} & set(high)  # the student's comparar_e3
    assert zero["repetition"] > high["repetition"]
    assert zero["distinct_2"] < high["distinct_2"]
    assert zero["samples"] == 2 and zero["eval_length"] == pytest.approx(11.0)
    assert zero["base_perplexity"] is None and zero["kl_measured"] is None  # no model loaded
    frame = ex.table(rows, ex.E3_COLUMNS)
    assert frame.shape[0] == 3


def test_plots_write_png(tmp_path):
    runs = [ex.load_run(make_run(tmp_path, n, profile="ci", metrics=history(10, seed=i)), label=n) for i, n in enumerate(("a", "b"))]
    path = ex.plot_series(runs, [("reward", "recompensa"), ("kl", "KL"), (ex.format_curve, "formato")], tmp_path / "c.png", "t")
    assert path.stat().st_size > 1000
    bars = ex.plot_bars([{"label": "a", "x": 1.0}, {"label": "b", "x": None}], [("x", "x")], tmp_path / "b.png")
    assert bars.stat().st_size > 1000


def test_load_run_by_path_and_missing_pieces(tmp_path):
    root = make_run(tmp_path, "only-metrics", profile="ci", metrics=history(3))
    run = ex.load_run(root)
    assert run.name == "only-metrics" and run.summary is None and run.eval_records() == []
    assert ex.logged_completions(run) == [] and ex.last_step_samples(run) == []
    assert json.loads((root / "run.json").read_text())["profile"]["name"] == "ci"


def test_e3_rows_with_models_measure_kl_and_perplexity(tmp_path, tiny_model_dir):
    torch = pytest.importorskip("torch")
    import shutil

    import transformers

    drifted_dir = tmp_path / "drifted"
    model = transformers.AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.5, alpha=1.0)
    model.save_pretrained(drifted_dir)
    runs = []
    for name, source in (("same-ci", tiny_model_dir), ("drifted-ci", drifted_dir)):
        root = make_run(tmp_path, name, profile="ci", metrics=history(3))
        record = json.loads((root / "run.json").read_text())
        record["base_model"] = str(tiny_model_dir)
        (root / "run.json").write_text(json.dumps(record))
        shutil.copytree(source, root / "model")
        texts = ["son cuatro .", "hola mundo ."]
        write_jsonl(root / "eval" / "base.jsonl", [eval_record(i, 4, None, False, "dos más dos", 3) for i in range(2)])
        write_jsonl(root / "eval" / "trained.jsonl", [eval_record(i, 4, None, False, t, 3) for i, t in enumerate(texts)])
        write_completions(root, 1, [("dos más dos", [(t, {"correctness_reward": 0.0}) for t in texts])])
        runs.append(ex.load_run(root, label=name))
    try:
        base, same, drifted = ex.e3_rows(runs, samples=2)
    finally:
        ex.LogProbScorer.release()
    assert same["kl_measured"] == pytest.approx(0.0, abs=1e-6)
    assert drifted["kl_measured"] > 1e-3
    assert same["base_perplexity"] > 1.0 and base["base_perplexity"] > 1.0
    assert same["base_perplexity"] == pytest.approx(drifted["base_perplexity"])  # same texts, same base model


def test_training_examples_rank_by_format_and_score_correctness(tmp_path):
    root = e2_run(tmp_path)
    write_completions(root, 1, [("q1", [(answer(1), {"format_reward": 0.0, "soft_format_reward": 0.0})])])
    write_completions(root, 2, [("q1", [
        ("18", {"format_reward": 0.0, "soft_format_reward": 0.0}),
        (answer(17), {"format_reward": 0.5, "soft_format_reward": 0.4}),
        (answer(18), {"format_reward": 0.0, "soft_format_reward": 0.3}),
    ])])
    examples = ex.training_examples(ex.load_run(root), {"q1": "18"}, k=2)
    assert [e["step"] for e in examples] == [2, 2]
    assert [e["format_paid"] for e in examples] == [pytest.approx(0.9), pytest.approx(0.3)]
    assert [e["correct"] for e in examples] == [False, True]


def test_the_rtx5090_exercise_budget_follows_its_rule_from_the_time_plan(tmp_path):
    from labs.vram.timeplan import time_plan

    gpu = get_profile("rtx5090")
    steps = ex.BUDGETS["rtx5090"]["max_steps"]
    assert ex.budget_steps(gpu) == steps and steps % gpu.save_steps == 0

    def e1_with_reference(n):
        p = gpu.replace(max_steps=n)
        return sum(time_plan(r).hours for r in [p] + [perfil_con_grupo(p, g) for g in ex.LESSON_GROUP_SIZES])

    assert e1_with_reference(steps) <= ex.EXERCISE_HOURS < e1_with_reference(steps + gpu.save_steps)
    hours = ex.planned_hours(ex.planned_variants("E1", gpu, tmp_path), gpu, tmp_path)
    assert hours == pytest.approx(e1_with_reference(steps) - time_plan(gpu.replace(max_steps=steps)).hours)
    assert ex.planned_hours(ex.planned_variants("E1", "ci", tmp_path), get_profile("ci")) == 0.0


def test_a_recorded_budget_is_what_the_builders_and_notebooks_use(tmp_path):
    gpu = get_profile("rtx5090")
    assert ex.recorded_budget(gpu, tmp_path) == {}
    ex.save_budget(gpu, {"max_steps": 100, "eval_size": 200}, tmp_path)
    planned = [v for e in ("E1", "E2", "E3") for v in ex.planned_variants(e, gpu, tmp_path)]
    for v in planned + built(gpu, tmp_path):
        p = v.profile(gpu)
        assert (p.max_steps, p.eval_size) == (100, 200), v.name
    assert all(v.profile(gpu).max_steps == 100 for e in ("E1", "E2", "E3") for v in ex.saved_variants(e, gpu, tmp_path))
    assert "max_steps=100" in ex.budget_note(gpu, tmp_path)
    assert all(v.profile(gpu).max_steps == ex.BUDGETS["rtx5090"]["max_steps"]
               for v in ex.e1_variants(gpu, perfil_con_grupo, tmp_path, budget={}))


def test_every_exercise_budget_follows_the_time_plan_rule():
    """rtx5090-base (the recommended main-run profile) gets its budget from the same rule as rtx5090."""
    for name, budget in ex.BUDGETS.items():
        assert ex.budget_steps(get_profile(name)) == budget["max_steps"], name
