import json

import pytest

from debate_audit.models import ModelSpec, read_fingerprint, write_fingerprint


def test_unknown_key_is_named():
    with pytest.raises(ValueError, match=r"models\.m: unknown key\(s\) \['batchsize'\]"):
        ModelSpec.from_config("m", {"source": "hf", "id": "x/y", "batchsize": 4})


@pytest.mark.parametrize(
    "entry, missing",
    [({"source": "hf"}, "id"), ({"source": "local"}, "path"), ({"source": "gguf-package", "id": "pkg"}, "gguf_file")],
)
def test_each_source_names_the_key_it_needs(entry, missing):
    with pytest.raises(ValueError, match=f"needs the key '{missing}'"):
        ModelSpec.from_config("m", entry)


def test_fingerprint_follows_the_weights(tmp_path):
    (tmp_path / "model.safetensors").write_bytes(b"weights-1")
    first = write_fingerprint(tmp_path, name="v")["weights_sha256"]
    (tmp_path / "model.safetensors").write_bytes(b"weights-2")
    second = write_fingerprint(tmp_path, name="v")["weights_sha256"]
    assert first != second
    assert read_fingerprint(tmp_path)["weights_sha256"] == second
    assert json.loads((tmp_path / "fingerprint.json").read_text())["name"] == "v"


def test_missing_fingerprint_says_to_prepare_the_model(tmp_path):
    with pytest.raises(FileNotFoundError, match="prepare_model"):
        read_fingerprint(tmp_path)


@pytest.mark.slow
def test_prepared_embedded_model_is_plain_safetensors(embedded_model_dir):
    config = json.loads((embedded_model_dir / "config.json").read_text())
    assert "quantization_config" not in config
    assert list(embedded_model_dir.glob("*.safetensors"))
    assert not list(embedded_model_dir.glob("*.gguf")) and not list(embedded_model_dir.glob("*.bin"))
    assert len(read_fingerprint(embedded_model_dir)["weights_sha256"]) == 64
