"""Fluency measures for E3: repetition and distinct-n on text, and a model's log-probabilities on
completions (the base model's perplexity, and the k3 KL estimate TRL uses)."""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np

REPETITION_N = 3
_WORD = re.compile(r"\w+|[^\w\s]", re.UNICODE)


def words(text: str) -> list[str]:
    """Lower-cased words and single punctuation marks: the units of repetition and distinct-n."""
    return _WORD.findall(str(text).lower())


def ngrams(tokens: Sequence[str], n: int) -> list[tuple[str, ...]]:
    if n < 1:
        raise ValueError("n must be at least 1")
    return [tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1)]


def repetition_rate(text: str, n: int = REPETITION_N) -> float | None:
    """Share of the n-grams of one answer that repeat an earlier n-gram of the same answer.

    ``1 - unique n-grams / n-grams`` (the "rep-n" of Welleck et al., 2019): 0 for text that never
    repeats itself, close to 1 for a loop. None when the answer has fewer than n words.
    """
    grams = ngrams(words(text), n)
    if not grams:
        return None
    return 1.0 - len(set(grams)) / len(grams)


def distinct_n(texts: Iterable[str], n: int) -> float | None:
    """Distinct-n (Li et al., 2016) over a set of answers: unique n-grams / all n-grams, pooled.

    High when the answers use varied wording, low when they repeat the same phrases (within or
    across answers). None when the answers hold no n-gram at all.
    """
    counts: Counter = Counter()
    for text in texts:
        counts.update(ngrams(words(text), n))
    total = sum(counts.values())
    if total == 0:
        return None
    return len(counts) / total


def mean_repetition(texts: Iterable[str], n: int = REPETITION_N) -> float | None:
    rates = [r for r in (repetition_rate(t, n) for t in texts) if r is not None]
    return float(np.mean(rates)) if rates else None


# --------------------------------------------------------------------------------------------------
# the base model's log-probabilities on completions (perplexity, KL estimate)
# --------------------------------------------------------------------------------------------------


def k3_per_token(logp_policy: np.ndarray, logp_ref: np.ndarray) -> np.ndarray:
    """TRL's per-token KL estimate: exp(ref - logp) - (ref - logp) - 1 (never negative)."""
    delta = np.asarray(logp_ref, dtype=float) - np.asarray(logp_policy, dtype=float)
    return np.exp(delta) - delta - 1.0


class LogProbScorer:
    """A causal LM on CPU (or CUDA when there is one) that scores completions given their prompt."""

    _cache: dict[str, "LogProbScorer"] = {}

    def __init__(self, model_path: str, device: str | None = None, tokenizer=None):
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()  # a notebook needs no loading bar per model
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        dtype = torch.bfloat16 if self.device == "cuda" else torch.float32
        path = Path(model_path)
        if (path / "adapter_config.json").exists():  # a LoRA run saves only its adapter
            from peft import AutoPeftModelForCausalLM

            self.model = AutoPeftModelForCausalLM.from_pretrained(str(path), dtype=dtype)
        else:
            self.model = AutoModelForCausalLM.from_pretrained(str(model_path), dtype=dtype)
        self.model.to(self.device).eval()
        self.tokenizer = tokenizer if tokenizer is not None else AutoTokenizer.from_pretrained(str(model_path))
        self.path = str(model_path)

    @classmethod
    def get(cls, model_path: str) -> "LogProbScorer":
        """One scorer per model path and process (loading a model is the slow part)."""
        key = str(model_path)
        if key not in cls._cache:
            cls._cache[key] = cls(key)
        return cls._cache[key]

    @classmethod
    def release(cls) -> None:
        cls._cache.clear()

    def token_logprobs(self, prompt, completion: str) -> np.ndarray:
        """Log-probability of each completion token given the chat-formatted prompt and the tokens before it."""
        import torch

        tok = self.tokenizer
        if isinstance(prompt, str):
            prompt_text = prompt
        else:
            prompt_text = tok.apply_chat_template(list(prompt), tokenize=False, add_generation_prompt=True)
        prompt_ids = tok(prompt_text, add_special_tokens=False)["input_ids"]
        completion_ids = tok(completion, add_special_tokens=False)["input_ids"]
        if not completion_ids:
            return np.zeros(0)
        ids = torch.tensor([prompt_ids + completion_ids], device=self.device)
        with torch.no_grad():
            logits = self.model(input_ids=ids).logits[0, :-1].float()
        logprobs = torch.log_softmax(logits, dim=-1)
        targets = ids[0, 1:]
        picked = logprobs.gather(1, targets[:, None])[:, 0]
        return picked[len(prompt_ids) - 1 :].cpu().numpy()


def perplexity(scorer: LogProbScorer, pairs: Sequence[tuple]) -> dict:
    """Mean negative log-likelihood per token of (prompt, completion) pairs under ``scorer``, and exp of it."""
    total, count, n = 0.0, 0, 0
    for prompt, completion in pairs:
        lp = scorer.token_logprobs(prompt, completion)
        if len(lp):
            total -= float(np.sum(lp))
            count += len(lp)
            n += 1
    if count == 0:
        return {"nll": None, "perplexity": None, "tokens": 0, "completions": 0}
    nll = total / count
    return {"nll": nll, "perplexity": math.exp(nll), "tokens": count, "completions": n}


def kl_estimate(policy: LogProbScorer, reference: LogProbScorer, pairs: Sequence[tuple]) -> float | None:
    """Mean per-token k3 KL of ``policy`` from ``reference`` on completions sampled from the policy."""
    values = []
    for prompt, completion in pairs:
        lp = policy.token_logprobs(prompt, completion)
        lr = reference.token_logprobs(prompt, completion)
        if len(lp):
            values.append(k3_per_token(lp, lr))
    if not values:
        return None
    return float(np.mean(np.concatenate(values)))


def fluency(texts: Sequence[str]) -> dict:
    return {
        "repetition": mean_repetition(texts),
        "distinct_1": distinct_n(texts, 1),
        "distinct_2": distinct_n(texts, 2),
    }
