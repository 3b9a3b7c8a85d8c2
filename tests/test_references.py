"""Lesson 7.9's references (labs.l72.references): each tied to a course object that is resolved and run.

What only this module checks: every reference the lesson lists is there, with the course objects that apply it;
the checks pass on every profile; TRL's pages carry the versions the requirements files pin; and a renamed or
changed object breaks the check (so the L7.1 notebook's section 13 fails instead of showing a stale row).
"""

import pytest

from labs.core.profiles import PROFILES
from labs.doctor import pins
from labs.l72 import references as refs

LESSON_7_9 = ("RL Guide", "Advanced GRPO", "Standby", "GRPOTrainer", "colocate", "DeepSeek-R1", "willccbb")


def test_every_reference_of_the_lesson_is_listed_once():
    titles = [r.title for r in refs.REFERENCES]
    assert [sum(word in t for t in titles) for word in LESSON_7_9] == [1] * len(LESSON_7_9)


@pytest.mark.parametrize("name", sorted(PROFILES))
def test_every_check_passes_on_every_profile(name):
    rows = refs.check_all(name)
    assert len(rows) == len(refs.REFERENCES)
    for row in rows:
        assert row["found"] and row["objects"] and all(url.startswith("https://") for _, url in row["urls"])
    table = refs.markdown_es(rows)
    assert table.count("\n") == len(rows) + 1 and "<think>" not in table.replace("`<think>`", "")


def test_trl_pages_carry_the_pinned_versions():
    both = pins.read_both()
    rows = {row["title"]: row for row in refs.check_all("ci")}
    urls = [url for _, url in rows["Docs de TRL: GRPOTrainer"]["urls"]]
    for stack in ("cpu", "gpu"):
        assert f"https://huggingface.co/docs/trl/v{both[stack]['pins']['trl']}/en/grpo_trainer" in urls


def test_a_renamed_object_breaks_the_reference(monkeypatch):
    with pytest.raises(refs.ReferenceBroken, match="no_such_reward"):
        refs.resolve("rewards.no_such_reward")
    with pytest.raises(refs.ReferenceBroken):
        refs.resolve("labs.no_such_package.thing")
    import labs.l72.standby

    monkeypatch.delattr(labs.l72.standby, "STANDBY_ENV")
    with pytest.raises(refs.ReferenceBroken, match="STANDBY_ENV"):
        refs.check_all("ci")


def test_a_changed_object_breaks_the_check(monkeypatch):
    import labs.l72.standby

    monkeypatch.setattr(labs.l72.standby, "STANDBY_ENV", "OTRA_VARIABLE")
    with pytest.raises(refs.ReferenceBroken, match="OTRA_VARIABLE"):
        refs.check_all("ci")
    monkeypatch.undo()
    import rewards

    monkeypatch.setattr(rewards, "correctness_reward", lambda completions, **kw: [0.0] * len(completions))
    with pytest.raises(refs.ReferenceBroken, match="2.0"):
        refs.check_all("ci")
