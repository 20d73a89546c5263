"""What a model's fine-tuning keeps on the GPU besides its weights: the shape that the memory function needs
(models/memory.py, training_memory_bytes), read from the model's config.json as AutoModelForCausalLM builds it.

Parameters are counted on the meta device (no memory): the total, the largest decoder layer (what FSDP2
gathers at a time) and the root unit (everything outside the decoder layers: embeddings, final norm, head).

Activations are measured, not estimated by a formula per architecture: one decoder layer of each kind the
model has (Llama's one kind; gpt-oss's sliding-window and full attention, each with its experts; Qwen3.5's
linear and full attention) runs its forward and backward on fake tensors (torch's FakeTensorMode: the real
modeling code and the CPU kernels' output shapes, no memory, no arithmetic) at the sequence length asked, and
the bytes it saves for its backward and the peak of what it holds are read off (every storage counted while
alive). The same for the final norm and for the head with its loss over the positions a loss reads. A few
seconds an architecture (Qwen3.5's linear attention loops over 64-token chunks: ~10 s at 8192 tokens).

Kernels: the CPU's. SDPA runs flash attention there (it keeps the output and the log-sum-exp, as CUDA's flash
and memory-efficient kernels do); eager attention (gpt-oss, which has no SDPA path in transformers) keeps its
(heads x s x s) probabilities; Qwen3.5's linear-attention layers run transformers' torch implementation of the
gated delta rule (on a GPU with flash-linear-attention installed, its Triton kernel keeps less: the figure is
then an upper bound).
"""

from __future__ import annotations

import functools
import json
import weakref
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ModelShape:
    """What the memory of a fine-tune depends on, per architecture (memory.training_memory_bytes)."""

    params: int  # every parameter AutoModelForCausalLM loads
    root_params: int  # outside the decoder layers: embeddings, final norm, head (FSDP2's root unit)
    embedding_params: int  # the input embeddings (part of the root)
    tied: bool  # the head is the input embeddings
    layer_params: int  # the largest decoder layer (one FSDP2 unit)
    layers: int
    hidden: int
    vocab: int
    eager_attention: bool  # attention scores materialised (no SDPA path for the class)
    layer_kinds: tuple[str, ...]  # each layer's kind (layer_types, or "attention")
    full_attention_only: bool  # losses.py packs L_lm and L_fc into one pass (losses.full_attention_only)


def _text_fields(config: dict) -> dict:
    fields = dict(config)
    fields.pop("quantization_config", None)
    if "model_type" not in fields:
        raise ValueError("config.json has no model_type: which model AutoModelForCausalLM would load is unknown")
    return fields


def _build(config: dict, dtype: Any, **override: Any) -> Any:
    """AutoModelForCausalLM.from_config of `config` (its fields overridden) in the current device or fake mode."""
    from transformers import AutoConfig, AutoModelForCausalLM

    fields = _text_fields(config)
    model_type = fields.pop("model_type")
    built = AutoConfig.for_model(model_type, **fields)
    text = built.get_text_config() if hasattr(built, "get_text_config") else built
    for key, value in override.items():
        setattr(text, key, value)
    return AutoModelForCausalLM.from_config(built, dtype=dtype)


def _kinds(text: Any) -> tuple[str, ...]:
    types = getattr(text, "layer_types", None)
    return tuple(types) if types else ("attention",) * text.num_hidden_layers


@functools.cache
def _shape(config_json: str) -> ModelShape:
    import torch

    config = json.loads(config_json)
    with torch.device("meta"):
        model = _build(config, torch.float32)
    text = model.config.get_text_config() if hasattr(model.config, "get_text_config") else model.config
    names = set(getattr(model, "_no_split_modules", None) or [])
    layers = [m for m in model.modules() if type(m).__name__ in names]
    per_layer = [sum(p.numel() for p in layer.parameters()) for layer in layers]
    total = sum(p.numel() for p in model.parameters())
    kinds = _kinds(text)
    # as losses.full_attention_only decides for the loaded model
    if getattr(text, "layer_types", None):
        full_only = all(kind == "full_attention" for kind in kinds)
    else:
        full_only = getattr(text, "sliding_window", None) is None or getattr(text, "use_sliding_window", True) is False
    return ModelShape(
        params=total,
        root_params=total - sum(per_layer),
        embedding_params=model.get_input_embeddings().weight.numel(),
        tied=model.get_output_embeddings().weight is model.get_input_embeddings().weight,
        layer_params=max(per_layer),
        layers=len(layers),
        hidden=text.hidden_size,
        vocab=text.vocab_size,
        eager_attention=not getattr(model, "_supports_sdpa", False),
        layer_kinds=kinds,
        full_attention_only=full_only,
    )


def model_shape(config: dict) -> ModelShape:
    """The ModelShape of the model a config.json describes (its quantization_config ignored: MXFP4 experts
    are trained dequantized, models/weights.py)."""
    return _shape(json.dumps(config, sort_keys=True))


class LiveBytes:
    """Counts the bytes of every tensor storage alive, as a dispatch mode: a storage an operator creates is
    counted until it is freed, and one resized in place (FSDP2 frees and re-allocates its gathered parameters
    with `UntypedStorage.resize_`) is counted at its new size; `peak` is the most held at once. Storages made
    before it starts are counted only when handed to `track` (parameters, optimizer state); `ignore` keeps
    some out. On fake tensors it counts what the real ones would hold; on real CPU tensors it is the
    measurement torch lacks there (no allocator statistics on a CPU)."""

    def __init__(self) -> None:
        from torch.utils._python_dispatch import TorchDispatchMode
        from torch.utils.weak import WeakIdKeyDictionary

        tracker = self

        class Mode(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                from torch.utils._pytree import tree_flatten

                out = func(*args, **(kwargs or {}))
                for item in tree_flatten(out)[0]:
                    tracker.see(item)
                return out

        self.mode = Mode()
        self.sizes = WeakIdKeyDictionary()
        self.refs: set = set()
        self.current = 0
        self.peak = 0
        self.ignored: set[int] = set()
        self._resize = None

    def __enter__(self) -> LiveBytes:
        import torch

        original = torch.UntypedStorage.resize_
        tracker = self

        def resize_(storage, size):
            result = original(storage, size)
            box = tracker.sizes.get(storage)
            if box is None:  # made before: counted from now on
                tracker.add(storage)
            else:
                tracker.current += storage.nbytes() - box[0]
                box[0] = storage.nbytes()
                tracker.peak = max(tracker.peak, tracker.current)
            return result

        self._resize = original
        torch.UntypedStorage.resize_ = resize_
        self.mode.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        import torch

        self.mode.__exit__(*exc)
        torch.UntypedStorage.resize_ = self._resize

    def ignore(self, *tensors: Any) -> None:
        for t in tensors:
            self.ignored.add(id(t.untyped_storage()))

    def track(self, *tensors: Any) -> None:
        """Count storages made before (a module's parameters and gradients, an optimizer's state)."""
        from torch.utils._python_dispatch import is_traceable_wrapper_subclass

        for t in tensors:
            if is_traceable_wrapper_subclass(t):  # a DTensor: its local shard
                self.track(*(getattr(t, name) for name in t.__tensor_flatten__()[0]))
            else:
                self.see(t)

    def see(self, tensor: Any) -> None:
        import torch
        from torch.utils._python_dispatch import is_traceable_wrapper_subclass

        if not isinstance(tensor, torch.Tensor):
            return
        if is_traceable_wrapper_subclass(tensor):
            self.track(tensor)
            return
        self.add(tensor.untyped_storage())

    def add(self, storage: Any) -> None:
        if storage in self.sizes or id(storage) in self.ignored:
            return
        box = [storage.nbytes()]
        self.sizes[storage] = box
        self.current += box[0]
        self.peak = max(self.peak, self.current)
        self.refs.add(weakref.ref(storage, functools.partial(self._freed, box)))

    def _freed(self, box: list[int], ref: Any) -> None:
        self.current -= box[0]
        self.refs.discard(ref)


@dataclass(frozen=True)
class Activations:
    """Bytes of one part of the model for one row: `saved`, what its forward keeps for the backward (its
    inputs and parameters excluded); `peak`, the most it holds at once in its forward and backward together
    (saved tensors, outputs, temporaries, gradients of activations). Its parameters' gradients are dropped as
    they land: FSDP's unsharded gradients of a unit are counted apart (memory.training_memory_bytes), so the one
    weight gradient being computed at the peak, if any, counts twice (the largest: 0.1 GiB for Llama-8B, 1 GiB
    for gpt-oss-20b's experts)."""

    saved: int
    peak: int


def _measure(inputs: tuple, forward, params: list) -> Activations:
    """The Activations of `forward(*inputs)` and of the backward of a gradient of ones through its output.
    The inputs and `params` (made before) are counted in neither."""
    import torch

    live = LiveBytes()
    live.ignore(*(t for t in inputs if isinstance(t, torch.Tensor)), *params)
    saved: dict[int, int] = {}

    def pack(t):
        storage = t.untyped_storage()
        if id(storage) not in live.ignored:
            saved.setdefault(id(storage), storage.nbytes())
        return t

    with live:
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            out = forward(*inputs)
        keep = sum(saved.values())
        out.backward(torch.ones_like(out))
    return Activations(keep, live.peak)


@functools.cache
def _profile(config_json: str, dtype_name: str, length: int, kept: int) -> Profile:
    import torch
    from transformers.utils import logging as transformers_logging

    verbosity = transformers_logging.get_verbosity()
    transformers_logging.set_verbosity_error()  # its "falling back to the torch path" notes: nothing runs here
    try:
        return _probe(json.loads(config_json), getattr(torch, dtype_name), length, kept)
    finally:
        transformers_logging.set_verbosity(verbosity)


def _probe(config: dict, dtype: Any, length: int, kept: int) -> Profile:
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode

    shape = model_shape(config)
    kinds = list(dict.fromkeys(shape.layer_kinds))  # one layer of each kind, in the order they first appear
    last = max(shape.layer_kinds.index(k) for k in kinds)
    layers, masked = {}, {}
    with FakeTensorMode():
        model = _build(config, dtype, num_hidden_layers=last + 1)
        model.train()
        params = list(model.parameters())
        for p in params:
            p.register_post_accumulate_grad_hook(lambda q: setattr(q, "grad", None))
        inner = model.model
        hidden = shape.hidden
        position_ids = torch.arange(length)[None]
        x = torch.randn(1, length, hidden, dtype=dtype, requires_grad=True)
        cos, sin = inner.rotary_emb(x, position_ids)
        # The masks a layer is given (the masks themselves are counted by the memory function): eager attention
        # always adds one to its scores (a temporary of their size); SDPA runs causal without one where a row
        # has no padding, and with a boolean one otherwise (losses.py's packed rows, padded batches), which it
        # turns into an additive one of the scores' size that it keeps for its backward.
        eager = torch.zeros(1, 1, length, length, dtype=dtype) if shape.eager_attention else None
        boolean = torch.ones(1, 1, length, length, dtype=torch.bool).tril()
        for kind in kinds:
            layer = inner.layers[shape.layer_kinds.index(kind)]

            def forward(x, cos, sin, mask, layer=layer):
                out = layer(x, attention_mask=mask, position_embeddings=(cos, sin), position_ids=position_ids)
                return out[0] if isinstance(out, tuple) else out

            layers[kind] = _measure((x, cos, sin, eager), forward, params)
            if shape.eager_attention or kind == "linear_attention":
                masked[kind] = layers[kind]  # a linear-attention layer takes no 4-d mask
            else:
                masked[kind] = _measure((x, cos, sin, boolean), forward, params)
        norm = _measure((x,), inner.norm, params)
        read = torch.randn(1, kept, hidden, dtype=dtype, requires_grad=True)
        labels = torch.zeros(kept - 1, dtype=torch.long)

        def head(read, labels):
            # as losses.py reads the logits: L_lm's cross-entropy in fp32 over all but the last position, and,
            # where L_fc shares the pass (full attention only: _packed_terms), the last position's two labels
            logits = model.lm_head(read)
            loss = torch.nn.functional.cross_entropy(logits[0, :-1].float(), labels)
            if shape.full_attention_only:
                loss = loss + logits[0, -1, :2].float().sum()
            return loss

        logits = _measure((read, labels), head, params)
    return Profile(layers, masked, norm, logits)


@dataclass(frozen=True)
class Profile:
    """A model's Activations for one row: per layer kind without a mask (eager attention: with its additive
    mask) and given a boolean mask (`masked`), the final norm (over every position), and the head with its
    loss (over the positions whose logits a loss reads)."""

    layers: dict[str, Activations]
    masked: dict[str, Activations]
    norm: Activations
    head: Activations


def activation_profile(config: dict, dtype: Any, length: int, kept: int) -> Profile:
    """The Profile of one row of `length` tokens, the loss reading the logits of `kept` positions, for the
    model `config` describes, computing in `dtype` (bf16 on a GPU)."""
    return _profile(json.dumps(config, sort_keys=True), str(dtype).removeprefix("torch."), length, kept)
