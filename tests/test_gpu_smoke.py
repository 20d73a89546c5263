"""The GPU smoke script (python -m debate_audit.tools.gpu_smoke) at a toy shape on the CPU: every check it makes on
a GPU node runs here too, so the script cannot rot before a GPU is lent."""

import json

import pytest

from debate_audit.tools.gpu_smoke import main


@pytest.mark.slow
def test_the_gpu_smoke_script_passes_at_a_tiny_shape_on_the_cpu(embedded_model_dir, tmp_path, capsys):
    code = main(["--shape", "tiny", "--device", "cpu", "--model-dir", str(embedded_model_dir), "--out", str(tmp_path)])
    printed = capsys.readouterr().out
    assert code == 0, printed
    checks = {c["name"]: c for c in json.loads((tmp_path / "smoke.json").read_text())}
    assert set(checks) >= {
        "torch",
        "vllm",
        "fine-tuning",
        "fine-tuning memory",
        "scoring batch invariance",
        "generation",
    }
    assert all(c["ok"] for c in checks.values())
    assert "2 steps" in checks["fine-tuning"]["detail"]
    assert "0.00e+00" in checks["scoring batch invariance"]["detail"]  # exact on a CPU


def test_a_failing_part_fails_the_script_and_names_the_check(tmp_path, capsys):
    code = main(["--shape", "tiny", "--device", "cpu", "--model-dir", str(tmp_path / "absent"), "--out", str(tmp_path)])
    assert code == 1
    checks = {c["name"]: c for c in json.loads((tmp_path / "smoke.json").read_text())}
    assert not checks["scoring and generation"]["ok"] and checks["fine-tuning"]["ok"]
    assert "failed: scoring and generation" in capsys.readouterr().out
