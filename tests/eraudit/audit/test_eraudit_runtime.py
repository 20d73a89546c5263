"""Table 3: the device time of the audit's scoring calls per stage, and GPU-seconds per hidden question."""

import time

import polars as pl
import pytest

from debate_audit.eraudit.audit import runtime, scoring, verdicts
from debate_audit.models import ModelRef


class SlowLM:
    """Scores option A as the answer; sleeps `per_prompt` seconds per prompt not in its cache (a stand-in for
    device work, so the measured seconds have a known floor); keeps hit / miss counts like CallCache."""

    device = "cpu"

    def __init__(self, per_prompt=0.002, cached=()):
        self.per_prompt = per_prompt
        self.calls = []
        self.cache = type("Counts", (), {"misses": 0, "hits": 0})()
        self.known = set(cached)

    def choice_logprobs(self, prompts, labels, desc=""):
        self.calls.append(list(prompts))
        fresh = [p for p in prompts if p not in self.known]
        self.cache.misses += len(fresh)
        self.cache.hits += len(prompts) - len(fresh)
        time.sleep(self.per_prompt * len(fresh))
        return [[-0.2, -1.8] if "A. right" in p else [-1.8, -0.2] for p in prompts]


def test_timed_synchronises_nothing_on_a_cpu_and_measures_the_call():
    result, seconds = runtime.timed(lambda: time.sleep(0.05) or "done", "cpu")
    assert result == "done" and 0.05 <= seconds < 1.0


PAIRS = pl.DataFrame(
    {
        "pair_id": [1, 2],
        "q_m": ["qm1?", "qm2?"],
        "y_true": ["right"] * 2,
        "y_false": ["wrong"] * 2,
        "q_h": ["qh1?", "qh2?"],
        "h_true": ["right"] * 2,
        "h_false": ["wrong"] * 2,
    }
)
POOLS = {  # pool -> {pair_id: [texts]}; "s1b?" repeats in g1 and is scored once, in the search stage
    "search": {1: ["s1a?", "s1b?"], 2: ["s2a?", "s2b?"]},
    "g1": {1: ["s1b?", "t1b?", "t1c?"], 2: ["t2a?", "t2b?", "t2c?"]},
    "g2": {1: ["u1a?", "u1b?", "u1c?"], 2: ["u2a?", "u2b?", "u2c?"]},
}


def _write_inputs(tmp_path):
    PAIRS.write_parquet(tmp_path / "pairs.parquet")
    paths = []
    for pool, by_pair in POOLS.items():
        rows = [
            {
                "dataset": "d",
                "pair_id": k,
                "pool": pool,
                "generator": "m",
                "index": i,
                "round": 0,
                "text": t,
                "similarity": 0.9,
            }
            for k, texts in by_pair.items()
            for i, t in enumerate(texts)
        ]
        paths.append(tmp_path / f"{pool}.parquet")
        pl.DataFrame(rows).write_parquet(paths[-1])
    return paths


def test_scoring_time_is_split_by_stage_and_table3_adds_up(tmp_path, fake_model):
    paths = _write_inputs(tmp_path)
    labels = {
        "base": {"architecture": "arch", "length": None, "qh_weight": None},
        "org": {"architecture": "arch", "length": "w150", "qh_weight": 2.0},
    }
    lms = {}
    for checkpoint in ("base", "org"):
        lms[checkpoint] = fake_model(scoring, SlowLM())
        scoring.score_checkpoint(
            pairs=tmp_path / "pairs.parquet",
            paraphrases=paths,
            model=ModelRef("m", str(tmp_path)),
            out=tmp_path / f"{checkpoint}.scores.parquet",
            dataset="d",
            checkpoint=checkpoint,
            labels=labels[checkpoint],
            device_time_out=tmp_path / f"{checkpoint}.time.parquet",
        )
    times = pl.read_parquet(tmp_path / "base.time.parquet")
    stage = {r["stage"]: r for r in times.iter_rows(named=True)}
    # search: 2 q_m + 2 q_h + 4 search paraphrases; test: 11 distinct test paraphrases ("s1b?" was scored in search)
    assert (stage["search"]["questions"], stage["test"]["questions"]) == (8, 11)
    assert (stage["search"]["computed"], stage["test"]["prompts"], stage["test"]["device"]) == (16, 22, "cpu")
    assert [len(c) for c in lms["base"].calls] == [16, 22]  # one call per stage, both answer orders
    assert stage["test"]["device_s"] >= 22 * 0.002 and stage["search"]["device_s"] >= 16 * 0.002
    assert times["architecture"].to_list() == ["arch", "arch"] and times["length"].null_count() == 2

    # the audit's records (org gains 0 on q_m: kappa floor; equal probabilities: Delta 0 everywhere)
    scores = pl.concat(
        [pl.read_parquet(tmp_path / f"{c}.scores.parquet") for c in ("base", "org")], how="diagonal_relaxed"
    )
    deltas = verdicts.compute_deltas(scores, kappa=0.01, targets=["org"])
    records, _, _ = verdicts.run_audit(deltas, test_pools=["g1", "g2"], epsilon=0.5, eta=0.1, tau=None, tv_r=0.0)
    records = records.with_columns(
        pl.lit("arch").alias("architecture"), pl.lit("w150").alias("length"), pl.lit(2.0).alias("qh_weight")
    )
    records.write_parquet(tmp_path / "records.parquet")
    table = runtime.gpu_seconds_table(
        [tmp_path / "base.time.parquet", tmp_path / "org.time.parquet"], [tmp_path / "records.parquet"]
    )
    measured = pl.concat([pl.read_parquet(tmp_path / f"{c}.time.parquet") for c in ("base", "org")])
    for dataset in ("d", "all"):
        row = table.filter(pl.col("dataset") == dataset).row(0, named=True)
        assert (row["architecture"], row["setting"], row["target"], row["n_qh"]) == ("arch", "w150_qh2", "org", 2)
        # the table's seconds add up to the stages' measured device time of V_base and the target
        assert row["search_s_per_qh"] * row["n_qh"] == pytest.approx(
            measured.filter(pl.col("stage") == "search")["device_s"].sum()
        )
        assert row["test_s_per_qh"] * row["n_qh"] == pytest.approx(
            measured.filter(pl.col("stage") == "test")["device_s"].sum()
        )
        assert row["total_s_per_qh"] == pytest.approx(measured["device_s"].sum() / 2)
        # no counterexample: both pools read in full, 12 of the 11 distinct test questions' seconds
        assert (row["n_tested"], row["test_paraphrases"]) == (12, 11)
        assert row["test_s_per_qh_tested"] == pytest.approx(row["test_s_per_qh"] * 12 / 11)
        assert row["computed_share"] == 1.0


def test_cached_scores_show_in_the_computed_share(tmp_path, fake_model):
    paths = _write_inputs(tmp_path)
    first = fake_model(scoring, SlowLM(per_prompt=0.0))
    scoring.score_checkpoint(
        pairs=tmp_path / "pairs.parquet",
        paraphrases=paths,
        model=ModelRef("m", str(tmp_path)),
        out=tmp_path / "s.parquet",
        dataset="d",
        checkpoint="base",
        device_time_out=tmp_path / "t.parquet",
    )
    search_prompts = first.calls[0]
    fake_model(scoring, SlowLM(cached=search_prompts))  # a rerun finding the search stage in the cache
    scoring.score_checkpoint(
        pairs=tmp_path / "pairs.parquet",
        paraphrases=paths,
        model=ModelRef("m", str(tmp_path)),
        out=tmp_path / "s.parquet",
        dataset="d",
        checkpoint="base",
        device_time_out=tmp_path / "t.parquet",
    )
    computed = dict(pl.read_parquet(tmp_path / "t.parquet").select("stage", "computed").iter_rows())
    assert computed == {"search": 0, "test": 22}


def test_runtime_table_puts_gpu_seconds_beside_the_per_job_table(tmp_path):
    pl.DataFrame(
        {
            "architecture": ["arch"] * 4,
            "length": [None, None, "w150", "w150"],
            "qh_weight": [None, None, 2.0, 2.0],
            "dataset": ["d"] * 4,
            "checkpoint": ["base", "base", "org", "org"],
            "stage": ["search", "test"] * 2,
            "questions": [3, 4, 3, 4],
            "prompts": [6, 8, 6, 8],
            "computed": [6, 8, 0, 8],
            "device": ["NVIDIA H100"] * 4,
            "device_s": [1.0, 2.0, 3.0, 4.0],
        }
    ).write_parquet(tmp_path / "t.parquet")
    pl.DataFrame(
        {
            "architecture": ["arch"],
            "length": ["w150"],
            "qh_weight": [2.0],
            "dataset": ["d"],
            "target": ["org"],
            "pair_id": [1],
            "n_tested": [3],
        }
    ).write_parquet(tmp_path / "r.parquet")
    bench = tmp_path / "benchmarks" / "audit"
    bench.mkdir(parents=True)
    (bench / "scores_arch_d_base.tsv").write_text("s\tmax_rss\tcpu_time\n7.5\t100\t7.0\n")
    runtime.runtime_table(
        benchmarks=tmp_path / "benchmarks",
        markdown=tmp_path / "t.md",
        csv=tmp_path / "j.csv",
        parquet=tmp_path / "j.parquet",
        files=[bench / "scores_arch_d_base.tsv"],
        device_times=[tmp_path / "t.parquet"],
        records=[tmp_path / "r.parquet"],
        gpu_csv=tmp_path / "g.csv",
        gpu_parquet=tmp_path / "g.parquet",
    )
    gpu = pl.read_parquet(tmp_path / "g.parquet").filter(pl.col("dataset") == "all").row(0, named=True)
    assert (gpu["search_s_per_qh"], gpu["test_s_per_qh"], gpu["device"]) == (4.0, 6.0, "NVIDIA H100")
    assert gpu["test_s_per_qh_tested"] == pytest.approx(6.0 / 4 * 3) and gpu["computed_share"] == 22 / 28
    text = (tmp_path / "t.md").read_text()
    assert text.index("## GPU-seconds per hidden question") < text.index("## Per job")
    assert "audit/scores_arch_d_base" in text and "from the call cache" in text
