"""Paraphrase validation reasons, parsing of generations, and the pool top-up logic (no model)."""

import polars as pl
import pytest

from debate_audit.eraudit import paraphrase
from debate_audit.models import ModelRef
from debate_audit.eraudit.paraphrase_validation import (
    check,
    normalize,
    parse_numbered_list,
    parse_single,
)

ORIGINAL = "Why doesn't Extrone shoot the 3 farn beasts at 40°?"


def _reason(candidate, seen=(), similarity=0.9, floor=0.5):
    return check(ORIGINAL, candidate, [normalize(s) for s in seen], similarity, floor)


def test_normalize_is_nfkc_casefold_alphanumerics_only():
    assert normalize("  Stra\u00dfe, ＡＢＣ!? ") == "strasseabc"
    assert normalize("...") == ""


@pytest.mark.parametrize(
    ("candidate", "seen", "similarity", "reason"),
    [
        ("", (), 0.9, "empty"),
        ("  ?! ", (), 0.9, "empty"),
        ("why doesn't EXTRONE shoot the 3 farn beasts at 40°", (), 0.99, "identical"),
        ("For what reason won't Extrone fire at the 3 farn beasts at 40°?", ["For what reason won't extrone fire "
                                                                             "at the 3 farn beasts at 40 °"], 0.9,
         "duplicate"),
        ("For what reason won't Extrone fire at the farn beasts at 40°?", (), 0.9, "missing_number"),
        ("For what reason won't Extrone fire at the 3 farn beasts at 40 degrees?", (), 0.9, "missing_symbol"),
        ("For what reason won't Extrone fire at the 3 farn beasts at 40°?", (), 0.3, "low_similarity"),
        ("For what reason won't Extrone fire at the 3 farn beasts at 40°?", (), 0.8, None),
    ],
)
def test_validation_reasons(candidate, seen, similarity, reason):
    assert _reason(candidate, seen, similarity) == reason


def test_plain_punctuation_may_change():
    assert check("Is it red, or blue?", "Is the colour red or is it blue", [], 0.9, 0.5) is None


def test_parse_numbered_list_strips_markers_labels_and_quotes():
    text = 'Here are rewrites:\n1. "What is X?"\n2) Paraphrase: Which is X?\n\n3. **How is X?**\nNote: done'
    assert parse_numbered_list(text) == ["What is X?", "Which is X?", "How is X?"]
    assert parse_numbered_list("What is X?\nWhich one is X?") == ["What is X?", "Which one is X?"]


def test_parse_single_takes_the_first_rewrite_line():
    assert parse_single("Here is the rewritten question:\n\n\"What is X?\"\nIt asks ...") == "What is X?"
    assert parse_single("") == ""


class FakeDraws:
    """Deterministic candidates per round; records what was asked."""

    def __init__(self, per_round):
        self.per_round = per_round
        self.calls = []

    def __call__(self, round_, need):
        self.calls.append((round_, dict(need)))
        return {k: list(self.per_round[round_].get(k, [])) for k in need}


def _similarity(originals, candidates):
    return [0.1 if "far" in c else 0.9 for c in candidates]


def test_pool_top_up_draws_only_the_missing_and_reports_the_shortfall():
    draws = FakeDraws({
        0: {1: ["a b", "a b", "c d"], 2: ["e f", "g h", "i j", "k l"]},
        1: {1: ["far away", "A B!"]},
        2: {1: ["m n"]},
    })
    pools = paraphrase.fill_pools({1: "orig one", 2: "orig two"}, 3, draws, _similarity, min_similarity=0.5,
                                  max_topup_rounds=2)
    assert draws.calls == [(0, {1: 3, 2: 3}), (1, {1: 1}), (2, {1: 1})]
    assert [t for _, t, _ in pools[1].kept] == ["a b", "c d", "m n"]
    assert [(r, reason) for r, _, reason, _ in pools[1].rejected] == [
        (0, "duplicate"), (1, "low_similarity"), (1, "duplicate")]
    assert pools[2].rounds == 1
    assert [reason for *_, reason, _ in pools[2].rejected] == ["surplus"]
    kept, rejected, report = paraphrase.pool_frames(pools, dataset="d", pool="search", generator="m", size=3)
    rep = {r["pair_id"]: r for r in report.iter_rows(named=True)}
    assert (rep[1]["generated"], rep[1]["kept"], rep[1]["shortfall"], rep[1]["rounds"]) == (6, 3, 0, 3)
    assert rep[1]["rejected_duplicate"] == 2 and rep[1]["rejected_low_similarity"] == 1
    assert rep[2]["rejected_surplus"] == 1
    # every candidate ends up kept or rejected
    assert kept.height + rejected.height == sum(r["generated"] for r in rep.values())
    assert kept.filter(pl.col("pair_id") == 1)["index"].to_list() == [0, 1, 2]


def test_pool_shortfall_after_the_last_round():
    draws = FakeDraws({0: {1: ["x y"]}, 1: {1: ["x y"]}})
    pools = paraphrase.fill_pools({1: "orig"}, 3, draws, _similarity, min_similarity=0.5, max_topup_rounds=1)
    _, _, report = paraphrase.pool_frames(pools, dataset="d", pool="g", generator="m", size=3)
    row = report.row(0, named=True)
    assert (row["kept"], row["shortfall"], row["rejected_duplicate"], row["rounds"]) == (1, 2, 1, 2)


def test_openai_generator_never_puts_the_key_in_the_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TEST_PARAPHRASE_KEY", "sk-secret-value")
    from debate_audit.models.serving import OpenAIChatModel

    gen = OpenAIChatModel(base_url="http://localhost:1/v1", model="m", api_key_env="TEST_PARAPHRASE_KEY",
                          fingerprint="fp", cache=str(tmp_path / "c.sqlite"))
    sent = []

    def fake_post(payload):
        sent.append(payload)
        return {"choices": [{"message": {"content": f" r{i} "}} for i in range(payload["n"])]}

    monkeypatch.setattr(gen, "_post", fake_post)
    params = paraphrase.GenerationParams(max_new_tokens=20, do_sample=True, num_samples=2, seed=3)
    assert gen.generate([[{"role": "user", "content": "q"}]], params) == [["r0", "r1"]]
    assert sent[0]["seed"] == 3 and sent[0]["n"] == 2 and "sk-secret" not in str(sent[0])
    assert gen.generate([[{"role": "user", "content": "q"}]], params) == [["r0", "r1"]]  # cached
    assert len(sent) == 1
    gen.close()
    stored = b"".join(f.read_bytes() for f in (tmp_path / "c.sqlite").rglob("*") if f.is_file())  # cache dir
    assert stored and b"sk-secret-value" not in stored


def test_pool_settings_let_a_generator_override_the_test_defaults():
    cfg = {
        "search": {"generator": "m0", "size": 8, "seed": 0},
        "test": {"size": 6, "temperature": 0.8, "seed": 1, "generators": {"g": {"model": "m1", "seed": 5}}},
    }
    assert paraphrase.pool_settings(cfg, None)[:2] == ("search", "m0")
    pool, model, settings = paraphrase.pool_settings(cfg, "g")
    assert (pool, model, settings["seed"], settings["temperature"], settings["size"]) == ("g", "m1", 5, 0.8, 6)
    assert "generators" not in settings
    with pytest.raises(ValueError, match="search"):
        paraphrase.pool_settings(cfg, "search")


# ------------------------------------------------------------------ test pools: per-draw filters only
STREAM = ["a b 7", "A B 7!", "a b 7", "", "orig 7", "far off 7", "c d 7", "no number", "c d 7", "e f 7", "  ", "g h 7"]


def _kept(draws, dedupe, size=None):
    """Kept texts (multiset) of one pool filled in a single draw round from `draws`."""
    from collections import Counter

    pools = paraphrase.fill_pools({1: "orig 7"}, size or len(draws), FakeDraws({0: {1: draws}}), _similarity,
                                  min_similarity=0.5, max_topup_rounds=0, dedupe=dedupe)
    return Counter(t for _, t, _ in pools[1].kept), pools


def test_test_pool_filters_look_at_one_draw_alone():
    """Filtering then permuting gives the same kept multiset as permuting then filtering: whether a draw is
    kept never depends on the other draws, so the kept stream of i.i.d. draws stays i.i.d."""
    import random

    reference, _ = _kept(STREAM, dedupe=False)
    rng = random.Random(0)
    for _ in range(200):
        permuted = STREAM[:]
        rng.shuffle(permuted)
        assert _kept(permuted, dedupe=False)[0] == reference
    # the duplicate check of the search pool does depend on the earlier draws: some order keeps another text
    search_reference, _ = _kept(STREAM, dedupe=True)
    differs = False
    for _ in range(200):
        permuted = STREAM[:]
        rng.shuffle(permuted)
        differs |= _kept(permuted, dedupe=True)[0] != search_reference
    assert differs


def test_test_pools_keep_and_count_duplicates_the_search_pool_drops_them():
    kept, pools = _kept(STREAM, dedupe=False)
    # kept: "a b 7" x2, "A B 7!", "c d 7" x2, "e f 7", "g h 7"; the rest fail a per-draw check
    assert sum(kept.values()) == 7 and kept["a b 7"] == 2 and kept["c d 7"] == 2
    reasons = sorted(reason for _, _, reason, _ in pools[1].rejected)
    assert reasons == ["empty", "empty", "identical", "low_similarity", "missing_number"]
    _, _, report = paraphrase.pool_frames(pools, dataset="d", pool="g", generator="m", size=len(STREAM))
    row = report.row(0, named=True)
    assert row["duplicates_kept"] == 3 and row["rejected_duplicate"] == 0
    kept_search, pools_search = _kept(STREAM, dedupe=True)
    assert sum(kept_search.values()) == 4  # a b 7, c d 7, e f 7, g h 7
    _, _, report = paraphrase.pool_frames(pools_search, dataset="d", pool="search", generator="m", size=12)
    assert report.row(0, named=True)["rejected_duplicate"] == 3


class RepeatingGenerator:
    """Every sample is the same rewrite: a generator that repeats itself."""

    def generate(self, messages, params, desc=""):
        if "numbered list" in messages[0][1]["content"]:
            return [["1. Which 7 is it?\n2. Which 7 is it?"] * params.num_samples for _ in messages]
        return [["Which 7 is it?"] * params.num_samples for _ in messages]


class FlatEmbedder:
    def similarity(self, originals, candidates):
        return [0.9] * len(candidates)


@pytest.mark.parametrize(("pool", "kept", "duplicates"), [("search", 1, 0), ("g1", 3, 2)])
def test_build_pool_dedupes_the_search_pool_only(tmp_path, fake_model, pool, kept, duplicates):
    pl.DataFrame({"pair_id": [0], "q_h": ["What 7 is it?"]}).write_parquet(tmp_path / "pairs.parquet")
    fake_model(paraphrase, RepeatingGenerator())
    paraphrase.build_pool(pairs=tmp_path / "pairs.parquet", split=None, dataset="d", pool=pool,
                          generator=ModelRef("m", str(tmp_path)), out=tmp_path / "o.parquet",
                          rejected=tmp_path / "r.parquet", report=tmp_path / "rep.parquet",
                          settings=paraphrase.PoolSettings.from_config(
                              {"size": 3, "temperature": 1.0, "top_p": 1.0, "seed": 0, "max_new_tokens": 8,
                               "max_topup_rounds": 1, "model": "m"}, min_similarity=0.5),
                          embedder=FlatEmbedder())
    row = pl.read_parquet(tmp_path / "rep.parquet").row(0, named=True)
    assert (row["kept"], row["duplicates_kept"]) == (kept, duplicates)
    assert pl.read_parquet(tmp_path / "o.parquet")["text"].to_list() == ["Which 7 is it?"] * kept
