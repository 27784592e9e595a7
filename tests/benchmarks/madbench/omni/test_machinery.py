"""Prompts, option scores, the response cache and ask(): on a tiny random linear model."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import numpy as np
import pytest

from madbench_common.benchmarks.madbench.omni.ask import Media, ask
from madbench_common.benchmarks.madbench.omni.parse import REFUSAL, UNPARSED
from madbench_common.benchmarks.madbench.omni.scoring import label_probs, positive_score
from madbench_common.benchmarks.madbench.prompts import (
    MADBENCH_PROMPTS,
    load_prompt,
    packaged_prompts,
    prompts_markdown,
)
from madbench_common.core.errors import ConfigError
from madbench_common.core.store import FileStore
from madbench_common.models.answer_cache import ResponseCache, ResponseKey
from madbench_common.models.roles import OmniAnswer, OptionLogprob
from tests.benchmarks.madbench.omni.questions import BIN, FOUR

from .toy import ToyOmni


def _media(seed: int = 0, video: bool = False) -> Media:
    rng = np.random.default_rng(seed)
    frames = rng.integers(0, 255, (4, 16, 16, 3), dtype=np.uint8) if video else None
    return Media(rng.normal(0, 0.1, 16000).astype(np.float32), 16000, frames,
                 2.0 if video else 0.0)


def test_packaged_prompts_cover_the_papers_tasks() -> None:
    files = packaged_prompts()
    assert [f.name for f in files] == ["P_bin", "P_4way", "P_comp", "P_SC"]
    for task, name in MADBENCH_PROMPTS.items():
        q = load_prompt(name).question(task)
        assert q.hash and len(q.hash) == 16 and q.task == task
        assert q.answer_format in q.full_text
    assert FOUR.labels == ("R", "S", "E", "Q")
    assert load_prompt("P_SC").question("scene").labels == ("inconsistent", "consistent")


def test_hash_covers_what_the_model_sees_not_synonyms() -> None:
    longer = dataclasses.replace(BIN, text=BIN.text + " Listen carefully.")
    assert longer.hash != BIN.hash
    assert dataclasses.replace(BIN, version=2).hash != BIN.hash
    fewer = dataclasses.replace(BIN, options=tuple(
        dataclasses.replace(o, synonyms=()) for o in BIN.options))
    assert fewer.hash == BIN.hash


def test_prompt_file_errors_name_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: X\nversion: 1\nquestions:\n  - task: binary\n    text: t\n"
                   "    answer_format: f\n    options: [{answer: a, label: x}]\n")
    with pytest.raises(ConfigError, match=r"bad\.yaml.*two options"):
        load_prompt(bad)
    bad.write_text("name: X\nversion: one\nquestions: []\n")
    with pytest.raises(ConfigError, match="version"):
        load_prompt(bad)
    with pytest.raises(ConfigError, match="unknown prompt"):
        load_prompt("P_nothing")


def test_markdown_prints_the_prompts_rows_used() -> None:
    text = prompts_markdown([BIN, FOUR], hashes=[BIN.hash, "0123456789abcdef"])
    assert BIN.hash in text and "Answer with one word: real or fake." in text
    assert FOUR.hash not in text and "0123456789abcdef" in text


def _answer(pairs: dict[str, tuple[int, float]], text: str = "") -> OmniAnswer:
    return OmniAnswer(text, tuple(OptionLogprob(k, i, lp) for k, (i, lp) in pairs.items()))


def test_binary_score_sums_distinct_first_tokens_then_normalises() -> None:
    # "fake" and " fake" share token 7: counted once; "Fake" is token 8.
    ans = _answer({"fake": (7, math.log(0.2)), " fake": (7, math.log(0.2)),
                   "Fake": (8, math.log(0.1)), "real": (9, math.log(0.1))})
    probs = label_probs(BIN, ans)
    assert probs is not None
    assert probs.probs["fake"] == pytest.approx(0.75)
    assert probs.mass == pytest.approx(0.4)
    assert positive_score(probs, "fake") == pytest.approx(0.75)


def test_fourway_is_a_softmax_over_the_letters() -> None:
    lp = np.log(np.array([0.1, 0.2, 0.3, 0.1]))
    ans = _answer({L: (i, float(v)) for i, (L, v) in enumerate(zip("RSEQ", lp))})
    probs = label_probs(FOUR, ans)
    assert probs is not None
    assert probs.ordered(FOUR.labels) == pytest.approx((1 / 7, 2 / 7, 3 / 7, 1 / 7))


def test_no_logits_no_score_and_shared_tokens_are_left_out() -> None:
    assert label_probs(BIN, OmniAnswer("Fake.")) is None
    shared = _answer({"fake": (1, math.log(0.3)), " Fake": (3, math.log(0.2)),
                      "real": (2, math.log(0.1)), " Real": (3, math.log(0.2))})
    probs = label_probs(BIN, shared)
    assert probs is not None and probs.probs["fake"] == pytest.approx(0.75)
    with pytest.raises(ConfigError, match="shared with another option"):
        label_probs(BIN, _answer({"fake": (3, -1.0), "real": (3, -1.0)}))


def test_toy_model_scores_follow_its_logits() -> None:
    out = ask(ToyOmni(), BIN, inputs=("a",), mode="A", load=lambda: _media(0))
    assert out.probs is not None and out.answer.logits == "generate"
    assert sum(out.probs.probs.values()) == pytest.approx(1.0)
    assert not out.excluded
    assert out.parsed in (*BIN.labels, REFUSAL, UNPARSED)


def test_refusal_without_logits_is_excluded_never_guessed() -> None:
    class Silent(ToyOmni):
        def answer(self, *args: object, **kwargs: object) -> OmniAnswer:
            return OmniAnswer("I'm sorry, I cannot tell.")

    out = ask(Silent(), BIN, inputs=("a",), mode="A", load=lambda: _media(0))
    assert out.parsed == REFUSAL and out.probs is None and out.excluded


def test_cache_reruns_cost_nothing_and_a_new_prompt_only_itself(tmp_path: Path) -> None:
    store, model = FileStore(str(tmp_path)), ToyOmni()
    questions = [BIN, FOUR]
    inputs = [(f"sha{i}",) for i in range(3)]

    def sweep(qs: list, cache: ResponseCache) -> list:
        return [ask(model, q, inputs=x, mode="A", load=lambda i=i: _media(i), cache=cache,
                    image="img@sha256:00")
                for q in qs for i, x in enumerate(inputs)]

    first = sweep(questions, ResponseCache(store))
    assert model.calls == 6
    again = sweep(questions, cache := ResponseCache(store))
    assert model.calls == 6 and cache.hits == 6 and cache.misses == 0
    assert [o.answer for o in again] == [o.answer for o in first]
    assert [o.parsed for o in again] == [o.parsed for o in first]
    bumped = dataclasses.replace(FOUR, version=2)
    sweep([BIN, bumped], cache := ResponseCache(store))
    assert model.calls == 9 and cache.hits == 3 and cache.misses == 3


def test_cache_key_separates_image_inputs_mode_and_pairing(tmp_path: Path) -> None:
    base = ResponseKey("m", "v", "img", "h", ("a", "b"), "AV", "paired", {"fps": 2.0})
    others = [dataclasses.replace(base, **change) for change in (
        {"image": "img2"}, {"inputs": ("a", "c")}, {"mode": "A"}, {"pairing": "shuffled"},
        {"settings": {"fps": 1.0}}, {"prompt_hash": "h2"}, {"model_version": "v2"})]
    assert len({k.digest() for k in [base, *others]}) == 8
    cache = ResponseCache(FileStore(str(tmp_path)))
    cache.put(base, OmniAnswer("Fake.", (OptionLogprob("fake", 1, -0.5),), "generate", 1.5))
    assert cache.get(base) == OmniAnswer("Fake.", (OptionLogprob("fake", 1, -0.5),),
                                         "generate", 1.5)
    assert all(cache.get(k) is None for k in others)
    (tmp_path / cache.key_path(base)).write_text("{not json")
    assert cache.get(base) is None
