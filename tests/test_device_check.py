"""The device check (benchmarks/gpu_device_check.py, tools/device_check.py) at toy shapes on the CPU: every part it
runs on a GPU node runs here too, so the script cannot rot before a GPU is lent."""

import json

import pytest

from debate_audit.tools.device_check import PARTS, main


@pytest.mark.slow
def test_every_part_of_the_device_check_passes_at_toy_shapes_on_the_cpu(embedded_model_dir, tmp_path, capsys):
    code = main(["--shape", "tiny", "--device", "cpu", "--model-dir", str(embedded_model_dir), "--out", str(tmp_path)])
    printed = capsys.readouterr().out
    assert code == 0, printed
    lines = [json.loads(line) for line in (tmp_path / "device_check.jsonl").read_text().splitlines()]
    parts = {line["part"]: line for line in lines}
    assert list(parts) == list(PARTS) and all(line["ok"] for line in lines), printed
    assert parts["environment"]["versions"]["kernels"] and parts["environment"]["hub"].startswith("unreachable")
    assert parts["smoke"]["batch_invariance_gap"] == 0.0  # exact on a CPU
    fsdp = parts["fsdp"]
    assert fsdp["saved_weight_equal"] and len(fsdp["losses"]) == 2
    assert 0.75 <= fsdp["peak_over_plan"] <= 1.0 and set(fsdp["planned_terms_gib"]) >= {"shards", "root", "layers"}
    gpt_oss = parts["gpt-oss"]
    assert all(norm > 0 for norm in gpt_oss["expert_grad_norms"]) and gpt_oss["cache_namespace_marks_dequantized"]
    assert parts["qwen3.5"]["class"] == "Qwen3_5ForCausalLM" and parts["qwen3.5"]["weight_equal_to_saved"]
    assert parts["mfu"]["tokens_per_s"] > 0 and parts["mfu"]["mfu"] is None  # no bf16 peak for a CPU


def test_a_failing_part_fails_the_check_names_it_and_the_others_still_run(tmp_path, capsys):
    code = main(
        [
            "--shape",
            "tiny",
            "--device",
            "cpu",
            "--model-dir",
            str(tmp_path / "absent"),
            "--out",
            str(tmp_path),
            "--parts",
            "smoke",
            "qwen3.5",
        ]
    )
    assert code == 1
    parts = {line["part"]: line for line in map(json.loads, (tmp_path / "device_check.jsonl").read_text().splitlines())}
    assert not parts["smoke"]["ok"] and "absent" in parts["smoke"]["error"] and parts["qwen3.5"]["ok"]
    assert "failed: smoke" in capsys.readouterr().out
