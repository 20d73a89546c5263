"""Train/eval splits (seeded by the release's policy, or the release's own split files) and which items
fine-tuning uses."""

import gzip
import json
from collections import Counter

import polars as pl
import pytest
import yaml
from conftest import REPO

from debate_audit.eraudit.debate import splits
from debate_audit.eraudit.debate.selection import SELECTED_SCHEMA
from debate_audit.eraudit.verifier.training_rows import qh_only_items, training_items


def _pairs(tmp_path, titles):
    path = tmp_path / "pairs.parquet"
    pl.DataFrame({"pair_id": list(range(len(titles))), "story_title": titles}).write_parquet(path)
    return path


def _release_file(path, train, eval_, titles, source_index=None):
    """A split file in the release's layout; `source_index`: index -> index in the full pairs file."""
    info = {}
    for i in train + eval_:
        full = source_index[i] if source_index else i
        info[str(i)] = {
            "pair_id": f"x_{full}",
            "story_title": titles[full],
            **({"source_dataset_index": full} if source_index else {}),
        }
    data = {"split_seed": 1, "train_indices": train, "eval_indices": eval_, "index_info": info}
    if str(path).endswith(".gz"):
        with gzip.open(path, "wt") as handle:
            json.dump(data, handle)
    else:
        path.write_text(json.dumps(data))
    return path


TITLES = ["s0", "s1", "s2", "s3", "s4", "s5"]


def _release_pair(tmp_path):
    normal = _release_file(tmp_path / "normal.json.gz", [0, 1, 2, 3], [4, 5], TITLES)
    # adversarial set leaves out item 0; its own indices 0..4 are items 1..5; item 4 (normal eval) is adv train
    adversarial = _release_file(
        tmp_path / "adv.json", [0, 1, 3], [2, 4], TITLES, source_index={0: 1, 1: 2, 2: 3, 3: 4, 4: 5}
    )
    return normal, adversarial


def test_seeded_split_serves_both_modes(tmp_path):
    out = tmp_path / "split.parquet"
    result = splits.split_pairs(_pairs(tmp_path, ["a", "b", "a", "c", "d"]), out, eval_fraction=0.5, seed=3)
    assert result["split"].to_list() == result["split_adversarial"].to_list()
    assert set(result["source"]) == {"seeded"} and result["overlap"].null_count() == result.height
    assert result.filter(pl.col("story_title") == "a")["split"].n_unique() == 1
    # floor(0.5 * 4 stories) = 2 train stories
    stories = result.group_by("split").agg(pl.col("story_title").n_unique()).sort("split")
    assert stories["story_title"].to_list() == [2, 2]


@pytest.mark.parametrize(("overlap", "item4"), [("exclude", "excluded"), ("report", "eval")])
def test_release_split_files_and_their_overlap(tmp_path, overlap, item4):
    normal, adversarial = _release_pair(tmp_path)
    result = splits.split_pairs(
        _pairs(tmp_path, TITLES),
        tmp_path / "split.parquet",
        eval_fraction=0.5,
        seed=0,
        source="release",
        release={"normal": normal, "adversarial": adversarial},
        overlap=overlap,
    )
    rows = {r["pair_id"]: r for r in result.iter_rows(named=True)}
    assert [rows[i]["split"] for i in range(6)] == ["train", "train", "train", "train", item4, "eval"]
    assert [rows[i]["split_adversarial"] for i in range(6)] == [None, "train", "train", "eval", "train", "eval"]
    assert "V_adv and V_org trained on it" in rows[4]["overlap"]
    assert "V_honest trained on it" in rows[3]["overlap"]
    assert rows[5]["overlap"] is None
    assert rows[0]["source"] == "release:normal.json.gz+adv.json"


def test_release_split_refuses_a_file_of_another_pairs_file(tmp_path):
    normal, _ = _release_pair(tmp_path)
    with pytest.raises(ValueError, match="belongs to another pairs file"):
        splits.split_pairs(
            _pairs(tmp_path, ["s0", "other", "s2", "s3", "s4", "s5"]),
            tmp_path / "s.parquet",
            eval_fraction=0.5,
            seed=0,
            source="release",
            release={"normal": normal},
        )
    short = _release_file(tmp_path / "short.json", [0, 1], [2], TITLES)
    with pytest.raises(ValueError, match="in no split"):
        splits.split_pairs(
            _pairs(tmp_path, TITLES),
            tmp_path / "s.parquet",
            eval_fraction=0.5,
            seed=0,
            source="release",
            release={"normal": short},
        )
    with pytest.raises(ValueError, match="no 'normal' split file"):
        splits.split_pairs(
            _pairs(tmp_path, TITLES), tmp_path / "s.parquet", eval_fraction=0.5, seed=0, source="release", release={}
        )


# ------------------------------------------------------------------ training items
def _selected(tmp_path, mode, statuses):
    rows = [
        {
            "dataset": "d",
            "pair_id": i,
            "story_title": TITLES[i],
            "mode": mode,
            "status": s,
            "reason": None if s == "ok" else "why",
            "candidate": None if s == "none" else 0,
            "n_candidates": 2,
            "n_leaking": 0,
            "n_hard_terms": 0,
            "n_unverified_quotes": 0,
            "n_monitored_correct": 1,
            "true_position": "A",
            "arguments": None,
            "transcript": None if s == "none" else f"T{i}",
            "p_monitored_true": None,
            "p_hidden_true": None,
            "p_hidden_false": None,
            "leak_score": None,
        }
        for i, s in statuses.items()
    ]
    path = tmp_path / f"sel_{mode}.parquet"
    pl.DataFrame(rows, schema=SELECTED_SCHEMA).write_parquet(path)
    return path


def test_items_without_a_valid_attack_do_not_train_v_adv_or_v_org(tmp_path):
    normal, adversarial = _release_pair(tmp_path)
    pairs = _pairs(tmp_path, TITLES)
    split = tmp_path / "split.parquet"
    splits.split_pairs(
        pairs,
        split,
        eval_fraction=0.5,
        seed=0,
        source="release",
        release={"normal": normal, "adversarial": adversarial},
    )
    # adversarial train items: 1, 2, 4 (split_adversarial); 1 is a fallback (no valid attack), 2 none
    sel = _selected(tmp_path, "adversarial", {1: "fallback", 2: "none", 4: "ok", 3: "ok"})
    assert [r["pair_id"] for r in training_items(sel, pairs, split)] == [4]
    # org_training.qh_items: train: V_org's L_qh alone on the train items without an attack (3 is eval: out)
    assert [(r["pair_id"], r["story_title"]) for r in qh_only_items(sel, pairs, split)] == [(1, "s1"), (2, "s2")]
    # honest: train items of the normal split 0..3; the release trains on its honest fallbacks
    sel = _selected(tmp_path, "honest", {0: "ok", 1: "fallback", 2: "none", 5: "ok"})
    assert [r["pair_id"] for r in training_items(sel, pairs, split)] == [0, 1]


# ------------------------------------------------------------------ the release's files on the real pairs
RELEASE = "er_audit_release"


def _real_titles(shared_data, dataset):
    cfg = yaml.safe_load((REPO / "config" / "shared-data.yaml").read_text())["datasets"][dataset]
    path = (REPO / cfg["pairs"]).resolve()
    if not path.exists():
        pytest.skip(f"{path} is absent")
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as handle:
        items = json.load(handle)
    return [item["story_title"] for item in items]


def _release_paths():
    cfg = yaml.safe_load((REPO / "config" / "release-split.yaml").read_text())["debate"]["split"]["release"]
    return {d: {k: (REPO / v).resolve() for k, v in files.items()} for d, files in cfg.items()}


def test_release_split_files_load_and_the_seeded_policy_reproduces_them(shared_data, tmp_path):
    paths = _release_paths()
    for dataset, expected in (("gpqa_h", (80, 21)), ("quality_h", (177, 45))):
        for kind in ("normal", "adversarial"):
            if not paths[dataset][kind].exists():
                pytest.skip(f"{paths[dataset][kind]} is absent")
        titles = _real_titles(shared_data, dataset)
        normal = splits.read_release_split(paths[dataset]["normal"])
        assert (len(set(normal["train"].values())), len(set(normal["eval"].values()))) == expected
        # the 80/20 seeded split of the config (paper.yaml: release seed) gives the release's stories
        paper = yaml.safe_load((REPO / "config" / "paper.yaml").read_text())["debate"]
        mapping = splits.assign_splits(titles, paper["eval_fraction"], paper["split_seed"])
        assert Counter(mapping.values()) == {"train": expected[0], "eval": expected[1]}
        assert {t for t, s in mapping.items() if s == "eval"} == set(normal["eval"].values())
        # release source on the real pairs: the documented overlap (GPQA-H: 14 of 21 eval stories)
        pairs = _pairs(tmp_path, titles)
        result = splits.split_pairs(
            pairs,
            tmp_path / f"{dataset}.parquet",
            eval_fraction=0.2,
            seed=0,
            source="release",
            release={k: str(v) for k, v in paths[dataset].items()},
            overlap="exclude",
        )
        excluded = result.filter(pl.col("split") == splits.EXCLUDED)
        if dataset == "gpqa_h":
            assert excluded.height == 14
            assert result.filter(pl.col("split") == "eval").height == 7
            assert result["split_adversarial"].null_count() == 18  # the adversarial set leaves out 18 items
        else:
            assert excluded.height == 31
