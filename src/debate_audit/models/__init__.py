"""Model layer: specs, preparation into local safetensors directories, cached inference."""

from .lm import GenerationParams, LanguageModel, two_way_softmax
from .prepare import prepare_model, read_fingerprint, write_fingerprint
from .spec import ModelSpec

__all__ = [
    "GenerationParams",
    "LanguageModel",
    "ModelSpec",
    "prepare_model",
    "read_fingerprint",
    "two_way_softmax",
    "write_fingerprint",
]
