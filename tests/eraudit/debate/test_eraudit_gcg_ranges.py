"""GCG in jobs over ranges of the candidates (eraudit/debate/gcg_pool.py): the ranges cover every candidate
once, the merged pool is the one-job pool cell for cell, another range count recomputes no suffix, and a partial
set of ranges never becomes a pool; how many ranges a job's estimate needs (tools/job_sizes.py)."""

from __future__ import annotations

import logging
from pathlib import Path

import polars as pl
import pytest
from test_eraudit_gcg import PAIR, TINY, candidate

from debate_audit.eraudit.debate import gcg, gcg_pool
from debate_audit.eraudit.debate.debates import CANDIDATE_SCHEMA
from debate_audit.models import ModelRef, ModelSpec, prepare_model
from debate_audit.runtime.cluster import ClusterSettings
from debate_audit.tools.job_sizes import split_parts

# config/gcg.yaml's setting (the issue asks for the identity at it)
GCG_YAML = {"suffix_length": 8, "steps": 2, "top_k": 16, "candidates_per_step": 8, "seed": 0, "init_token": " x"}


@pytest.mark.parametrize("count", [0, 1, 2, 5, 7, 16])
@pytest.mark.parametrize("parts", [1, 2, 3, 8])
def test_the_ranges_cover_every_candidate_once_in_order(count, parts):
    spans = [gcg_pool.candidate_range(count, part, parts) for part in range(parts)]
    assert [i for span in spans for i in span] == list(range(count))
    assert max(len(s) for s in spans) - min(len(s) for s in spans) <= 1


def test_a_range_that_does_not_exist_is_refused():
    with pytest.raises(ValueError, match="range 3 of 3 does not exist"):
        gcg_pool.candidate_range(5, 3, 3)


@pytest.fixture(scope="module")
def tiny_ref(tmp_path_factory, embedded_model_dir) -> ModelRef:
    out = tmp_path_factory.mktemp("tiny-gcg-ranges")
    spec = ModelSpec.from_config("tiny-gcg", {"source": "random", "id": "llama", "tokenizer": "x", "init": TINY})
    prepare_model(spec, out, embedded_model_dir)
    return ModelRef("tiny-gcg", str(out), source="random", id="llama", batch_size=8)


def three_candidates(tmp_path: Path) -> tuple[Path, Path]:
    rows = [
        candidate(0, "A"),
        candidate(1, "B", b="It is <v_quote>the keeper</v_quote> who locks up."),
        candidate(2, "A", a="At dusk <v_quote>The keeper lit the lamp at dusk</v_quote>, as always."),
    ]
    cands, pairs = tmp_path / "candidates.parquet", tmp_path / "pairs.parquet"
    pl.DataFrame(rows, schema=CANDIDATE_SCHEMA).write_parquet(cands)
    pl.DataFrame([PAIR]).write_parquet(pairs)
    return cands, pairs


def run(tmp_path: Path, ref: ModelRef, out: str, cache: Path, parts: int, pool: str = "replace") -> tuple:
    cands, pairs = three_candidates(tmp_path)
    folder = tmp_path / out
    folder.mkdir(exist_ok=True)
    gcg_pool.optimise_candidates(
        cands, pairs, ref, folder / "pool.parquet", folder / "gcg.parquet", pool=pool, parts=parts,
        settings=gcg.GCGSettings(**GCG_YAML), readout="chat", order="seeded", order_seed=7, cache=str(cache),
    )  # fmt: skip
    return pl.read_parquet(folder / "pool.parquet"), pl.read_parquet(folder / "gcg.parquet")


@pytest.mark.slow
def test_three_ranges_merge_into_the_one_job_pool_cell_for_cell_and_another_count_recomputes_nothing(
    tmp_path, tiny_ref, caplog
):
    one_pool, one_records = run(tmp_path, tiny_ref, "one", tmp_path / "cache-one", parts=1)
    # an independent computation (its own cache): three jobs of one candidate each
    three_pool, three_records = run(tmp_path, tiny_ref, "three", tmp_path / "cache-three", parts=3)
    assert one_pool.equals(three_pool) and one_records.equals(three_records)
    assert one_records["status"].to_list() == ["ok"] * 3 and one_pool["gcg"].all()

    # another range count on the first run's cache: every suffix comes from it
    with caplog.at_level(logging.INFO, logger="debate_audit.eraudit.debate.gcg_pool"):
        two_pool, two_records = run(tmp_path, tiny_ref, "two", tmp_path / "cache-one", parts=2)
    reused = [r.getMessage() for r in caplog.records if "came from the cache" in r.getMessage()]
    assert reused == [
        "1 of 1 candidates' suffixes came from the cache",
        "2 of 2 candidates' suffixes came from the cache",
    ]
    assert two_pool.equals(one_pool) and two_records.equals(one_records)


def test_a_partial_or_repeated_set_of_ranges_is_never_merged_into_a_pool(tmp_path, tiny_ref):
    cands, pairs = three_candidates(tmp_path)
    settings = gcg.GCGSettings(suffix_length=2, steps=1, top_k=4, candidates_per_step=2)
    files = [tmp_path / f"part{i}.parquet" for i in range(3)]
    for i, path in enumerate(files):
        gcg_pool.optimise_range(
            cands, pairs, tiny_ref, path, part=i, parts=3, settings=settings, readout="chat", order="seeded",
            order_seed=7, cache=None,
        )  # fmt: skip
    assert [pl.read_parquet(f).height for f in files] == [1, 1, 1]
    out = (tmp_path / "pool.parquet", tmp_path / "gcg.parquet")
    with pytest.raises(ValueError, match=r"1 candidate\(s\) have no record.*pair 3 candidate 1"):
        gcg_pool.merge_pool(cands, pairs, [files[0], files[2]], *out, pool="replace")
    with pytest.raises(ValueError, match=r"1 candidate\(s\) have two records.*pair 3 candidate 0"):
        gcg_pool.merge_pool(cands, pairs, [files[0], *files], *out, pool="replace")
    fewer = tmp_path / "two.parquet"
    pl.read_parquet(cands).filter(pl.col("candidate") < 2).write_parquet(fewer)
    with pytest.raises(ValueError, match=r"have a record but no candidate.*pair 3 candidate 2"):
        gcg_pool.merge_pool(fewer, pairs, files, *out, pool="replace")
    assert not any(p.exists() for p in out)
    # complete: pool add keeps the natives and numbers the suffixed copies K + k
    pool = gcg_pool.merge_pool(cands, pairs, files, *out, pool="add")
    assert pool.select("candidate", "gcg", "gcg_source").rows() == [
        (0, False, 0), (1, False, 1), (2, False, 2), (3, True, 0), (4, True, 1), (5, True, 2),
    ]  # fmt: skip
    assert pl.read_parquet(out[1])["pool_candidate"].to_list() == [3, 4, 5]


def test_the_range_count_is_the_fewest_jobs_whose_first_attempt_fits_the_cap():
    settings = ClusterSettings(runtime_margin=2.0, min_runtime=30, max_runtime=2880)
    # 100 h of calls + 0.5 h loading per job, x2 margin: 24 h fits 23.5 h of calls -> 100 / 23.5 -> 5 jobs
    assert split_parts(settings, 100.0, 0.5) == 5
    assert split_parts(settings, 10.0, 0.5) == 1
    assert split_parts(settings, 23.5, 0.5) == 1  # exactly at the cap fits
    assert split_parts(settings, 23.6, 0.5) == 2
    # no cap, no work, or loading alone over the cap: one job (make plan warns of the last)
    assert split_parts(ClusterSettings(max_runtime=None), 1000.0, 0.5) == 1
    assert split_parts(settings, 0.0, 0.5) == 1
    assert split_parts(settings, 100.0, 25.0) == 1
