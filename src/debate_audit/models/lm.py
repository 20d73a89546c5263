"""The two model operations every stage uses: `generate` and `choice_logprobs`, batched and cached."""

from __future__ import annotations

import inspect
import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from tqdm.auto import tqdm

from .adapter import adapter_base, is_adapter, load_merged
from .batching import Batch, cut_batches, plan_batches
from .cache import CallCache, cache_key
from .chat import ChatFormat, NoChatTemplateError
from .cpu_numerics import make_batch_invariant, warm_up_vector_math
from .decoding import (
    NUMERICS_VERSION,
    Sampling,
    decode,
    forward_packed,
    left_pad,
    prefill,
    prefill_rows,
    register_attention,
)
from .linear_kernels import linear_attention, warn_if_fallback_on_gpu
from .params import (  # noqa: F401 - re-exported
    ChoiceScores,
    GenerationParams,
    Reply,
    hit_cap,
    record_replies,
    two_way_softmax,
)
from .prefix_store import PrefixStore
from .prepare import read_fingerprint
from .spec import resolve_device, resolve_dtype
from .weights import load_pretrained, weights_form

log = logging.getLogger(__name__)

Messages = list[dict[str, str]]


def _transformers_version() -> str:
    import transformers

    return transformers.__version__


def has_sliding_window(config) -> bool:
    """Whether some attention layer of the model sees only a window of recent keys."""
    config = config.get_text_config() if hasattr(config, "get_text_config") else config
    if not getattr(config, "sliding_window", None) or getattr(config, "use_sliding_window", True) is False:
        return False
    layer_types = getattr(config, "layer_types", None)
    return "sliding_attention" in layer_types if layer_types else True


def has_linear_attention(config) -> bool:
    """Whether some layer keeps a recurrent state instead of keys and values (Qwen3.5's hybrid layers)."""
    config = config.get_text_config() if hasattr(config, "get_text_config") else config
    return "linear_attention" in (getattr(config, "layer_types", None) or [])


class LanguageModel:
    """A prepared model directory loaded for inference, with its call cache."""

    def __init__(
        self,
        model_dir: str | Path,
        *,
        device: str = "auto",
        dtype: str = "auto",
        batch_size: int | str = 8,
        cache: str | Path | None = None,
        model: Any = None,
        tokenizer: Any = None,
        prefix_sharing: bool = True,
        generation_backend: Any = None,
        prefix_store_mb: int = 1024,
        chat_template_kwargs: dict[str, Any] | None = None,
        scoring_backend: Any = None,
    ):
        """`batch_size`: prompts per batch, or "auto": on GPU a probed token budget per scoring batch (see
        `probe_batch_tokens`) and 64 prompts per generation batch; on CPU 8. `prefix_sharing`: run a
        prompt prefix shared by several prompts once and reuse its key/value cache (scoring only).
        `generation_backend`: optional `serving.CompletionsBackend` / `serving.VLLMServer` that computes
        uncached `generate` calls instead of the in-process model (off by default); with one, the weights load
        only when something is scored in-process (`model`), after the backend's engine is stopped. `prefix_store_mb`: memory
        for the key/value states of recent prompts, reused by later calls on prompts that extend them (see
        prefix_store.py); 0 turns it off. `chat_template_kwargs`: the model's chat-template switches (chat.py).
        `scoring_backend`: optional backend (the generation backend's server) that computes uncached
        `choice_logprobs` calls from the rendered prompts' token ids instead of the in-process model.

        On CPU every result is batch-invariant (`self.batch_invariant`): a prompt's scores and greedy text are
        the same bits whatever else shares its batch, call or stored prefix, so a run resumed from a partly
        filled cache computes what an uninterrupted one does (see decoding.py). On GPU the kernels are not
        batch-invariant and the faster batched layout is kept."""
        from transformers import AutoConfig, AutoTokenizer

        self.model_dir = Path(model_dir)
        self.fingerprint = read_fingerprint(self.model_dir)["weights_sha256"]
        self.device = resolve_device(device)
        self.batch_invariant = self.device == "cpu"
        self.torch_dtype = resolve_dtype(dtype, self.device)
        self._auto_batch = batch_size == "auto"
        if self._auto_batch:
            batch_size = 64 if self.device.startswith("cuda") else 8
        self.batch_size = int(batch_size)
        # Scoring batches are bounded by tokens; on GPU "auto" lets the probe raise the prompt count too.
        self._max_batch = 4096 if self._auto_batch and self.device.startswith("cuda") else self.batch_size
        self._token_budget: int | None = None
        # A LoRA adapter checkpoint (adapter.py): the architecture and the weights are its base's.
        base_dir = adapter_base(self.model_dir) if model is None and is_adapter(self.model_dir) else None
        self._base_dir = base_dir
        model_config = model.config if model is not None else AutoConfig.from_pretrained(base_dir or self.model_dir)
        if has_sliding_window(model_config) or has_linear_attention(model_config):
            # A sliding-window layer keeps only its window of keys and a linear-attention layer a recurrent
            # state, so stored prompt states cannot be extended or copied row by row: no prefix reuse, and the
            # batch-invariant path (which copies states) is off.
            log.warning(
                "%s has sliding-window or linear-attention layers: prompt-prefix reuse and the "
                "batch-invariant CPU path are off for it (its scores can differ by ~1e-6 with batch "
                "composition)",
                self.model_dir,
            )
            self.batch_invariant = False
            prefix_sharing, prefix_store_mb = False, 0
        self.prefix_sharing = prefix_sharing
        self.prefix_min_tokens = 16
        self.generation_backend = generation_backend
        self.scoring_backend = scoring_backend
        self.no_logprobs: str | None = None  # every local model has them (an endpoint may not: api.py)
        self.renders_own_template = False  # its prompts are rendered here, by its tokenizer's template
        self.prefix_store = PrefixStore(prefix_store_mb << 20, min_tokens=self.prefix_min_tokens)
        self.tokenizer = tokenizer or AutoTokenizer.from_pretrained(self.model_dir)
        self.tokenizer.padding_side = "left"
        if self.tokenizer.pad_token is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self.chat = ChatFormat.of(self.tokenizer, chat_template_kwargs)
        self.unanswered = 0
        self.row_padding = None
        # The numerics version keeps results of older scoring code apart (decoding.NUMERICS_VERSION).
        # An MXFP4 checkpoint's experts are dequantized while loading (weights.py): its numbers are not the
        # packed kernel's, so they are kept apart from any computed by it.
        form = weights_form(base_dir or self.model_dir)
        # Qwen3.5's linear-attention layers compute other bits with the `gpu` extra's kernels than with
        # transformers' torch fallback (linear_kernels.py): each keeps its own results. None for other models.
        self.linear_attention = linear_attention(model_config, self.device)
        warn_if_fallback_on_gpu(str(self.model_dir), self.device, self.linear_attention)
        self.cache_namespace = (
            f"{self.fingerprint}-numerics{NUMERICS_VERSION}"
            + (f"-{form}" if form else "")
            + (f"-{self.linear_attention.namespace()}" if self.linear_attention else "")
        )
        self.cache = CallCache(cache, namespace=self.cache_namespace)
        self._cache_path = cache
        self._backend_cache: CallCache | None = None  # the generation backend's results (its own namespace)
        self.generation_engines: dict[str, int] = {}  # engine -> generations returned, for the provenance
        self._model = None
        if (generation_backend is None and scoring_backend is None) or model is not None:
            self._load_weights(model)

    @property
    def model(self) -> Any:
        """The in-process weights, loaded on first use: a job whose generations all come from a backend (or
        the cache) and that scores nothing never loads them."""
        if self._model is None:
            self._load_weights(None)
        return self._model

    def _load_weights(self, model: Any) -> None:
        if self.generation_backend is not None and self.scoring_backend is None:
            # An engine this job started holds the GPU (and memory) the weights need; in-process scoring
            # follows the generations (the judge), and a later generate call starts the engine again.
            self.generation_backend.close()
        base_dir = self._base_dir
        # Batch invariance needs an attention whose sums do not depend on the key axis's length (SDPA's CPU
        # kernels block it by its length): decoding.blocked_causal_attention.
        attn = register_attention() if self.batch_invariant else None
        if model is None:
            # attn None: SDPA where the class has it, else eager (gpt_oss has no SDPA kernel).
            kwargs = {"dtype": self.torch_dtype, **({"attn_implementation": attn} if attn else {})}
            if base_dir is not None:
                model = load_merged(self.model_dir, base_dir, **kwargs)
            else:
                model = load_pretrained(self.model_dir, **kwargs)
        elif (
            attn
            and getattr(model.config, "_attn_implementation", attn) != attn
            and hasattr(model, "set_attn_implementation")
        ):
            model.set_attn_implementation(attn)
        self._model = model.to(self.device).eval()
        if self.linear_attention is not None:
            from debate_audit.runtime.provenance import record_linear_attention

            # from here on transformers' layers run in-process (a job whose calls all go to a vLLM engine never
            # gets here, and records nothing of them)
            record_linear_attention(self.model_dir, self.linear_attention.record())
        if self.device == "cpu":
            warm_up_vector_math()
        if self.batch_invariant:
            self._pad_rows()
        # transformers 5 renamed the forward argument `past_key_values` to `cache`.
        self._cache_kwarg = (
            "cache" if "cache" in inspect.signature(self._model.forward).parameters else "past_key_values"
        )

    def _pad_rows(self) -> None:
        """Batch invariance on this CPU (cpu_numerics.py): the row padding its matrix products need, or
        batch invariance off where none works."""
        self.row_padding = make_batch_invariant(self.model)
        if self.row_padding is None:
            log.warning(
                "matrix products on this CPU depend on the number of rows in a way no row padding up to "
                "64 rows removes (MKL_CBWR=%s): %s is not batch-invariant here, its scores can differ by "
                "~1e-6 with batch composition",
                os.environ.get("MKL_CBWR"),
                self.model_dir,
            )
            self.batch_invariant = False
        elif not self.row_padding.trivial:
            log.info("matrix products on this CPU depend on the number of rows: padded to %s", self.row_padding)

    # ----------------------------------------------------------------- rendering
    def render_chat(self, messages: Messages, assistant_prefix: str | None = None) -> str:
        """The exact text the model sees: chat template, generation prompt, optional start of the reply.

        A conversation ending in an assistant message is a prefill: the model continues that message, and
        `generate` returns only the continuation (of a reasoning model: its final answer, chat.py).
        """
        try:
            return self.chat.render(self.tokenizer, messages, assistant_prefix)
        except NoChatTemplateError as err:
            raise NoChatTemplateError(f"{self.model_dir}: {err}") from None

    @property
    def has_chat_template(self) -> bool:
        """False for a pretrained base model: its prompts are plain documents (`render_plain`, `complete`)."""
        return self.chat.has_template

    def render_plain(self, text: str) -> str:
        """The exact text the model sees for the plain prompt `text` (a model without a chat template: its
        tokenizer's document prefix, Gemma's `<bos>`, then `text`; chat.py)."""
        return self.chat.plain(text)

    def _encode(self, text: str) -> list[int]:
        # The chat template already carries the special tokens.
        return self.tokenizer(text, add_special_tokens=False)["input_ids"]

    def _encode_many(self, indices: list[int], texts: Sequence[str]) -> dict[int, list[int]]:
        """`_encode` of texts[i] for each index, in one batched tokenizer call."""
        if not indices:
            return {}
        return dict(zip(indices, self.tokenizer([texts[i] for i in indices], add_special_tokens=False)["input_ids"]))

    def _key(self, op: str, prompt: str, params: dict[str, Any]) -> str:
        return cache_key(self.cache_namespace, str(self.torch_dtype), op, prompt, params)

    # --------------------------------------------------------------- operations
    def label_token_ids(self, labels: Sequence[str]) -> list[int]:
        ids = []
        for label in labels:
            tokens = self._encode(label)
            if len(tokens) != 1:
                raise ValueError(
                    f"answer label {label!r} is {len(tokens)} tokens for this tokenizer; "
                    "choice_logprobs scores single-token labels from one forward pass"
                )
            ids.append(tokens[0])
        return ids

    def scoring_prompt(self, messages: Messages, assistant_prefix: str | None = None) -> str:
        """What `choice_scores` takes for this model: the rendered text (`render_chat`)."""
        return self.render_chat(messages, assistant_prefix)

    def choice_scores(
        self, prompts: Sequence[str], labels: Sequence[str], *, desc: str = "scoring"
    ) -> list[ChoiceScores]:
        """`choice_logprobs` as `ChoiceScores`: every label computed, none a bound."""
        return [ChoiceScores(list(lp), [False] * len(lp)) for lp in self.choice_logprobs(prompts, labels, desc=desc)]

    @torch.inference_mode()
    def choice_logprobs(
        self, prompts: Sequence[str], labels: Sequence[str], *, desc: str = "scoring", max_rows: int | None = None
    ) -> list[list[float]]:
        """log P(label | prompt) for every label, all from one forward pass per prompt.

        `prompts` are fully rendered texts ending at the answer slot; each label is one token that
        continues the prompt (e.g. " A", " B"). Identical prompts are computed once; prompts sharing a
        token prefix (system message, story) reuse one key/value cache of that prefix (see batching.py).
        `max_rows`: at most this many prompts per forward pass (below the model's own batch size; speed and
        memory only).
        With a scoring backend, the server computes them from the same token ids (`_score_by_backend`).
        """
        label_ids = self.label_token_ids(labels)
        if self.scoring_backend is not None:
            return self._score_by_backend(prompts, labels, label_ids, desc)
        params = {"labels": list(labels)}
        if self._model is None:  # a generation backend deferred the weights
            self._load_weights(None)
        keys = [self._key("choice_logprobs", p, params) for p in prompts]
        cached = self.cache.get_many(keys)
        todo = list({k: i for i, k in enumerate(keys) if k not in cached}.values())
        encoded = self._encode_many(todo, prompts)
        if any(not seq for seq in encoded.values()):
            raise ValueError("choice_logprobs got an empty prompt; it needs at least one token before the answer slot")
        max_tokens = self._scoring_budget(max((len(s) for s in encoded.values()), default=0))
        rows, max_batch = self.batch_size, self._max_batch
        if max_rows is not None:
            rows, max_batch = min(rows, max_rows), min(max_batch, max_rows)
        # Prompts extending one that an earlier call ran (the judge's LLC prompt after its reply slots)
        # start from the stored states; the rest are planned with in-call prefix sharing.
        stored = {i: found for i in todo if (found := self.prefix_store.longest(encoded[i])) is not None}
        fresh_prompts = {i: seq for i, seq in encoded.items() if i not in stored}
        plan = (
            plan_batches(
                fresh_prompts,
                batch_size=max_batch,
                max_tokens=max_tokens,
                min_prefix=self.prefix_min_tokens,
                min_fill=0.85 if self.batch_invariant else 0.0,
            )
            if self.prefix_sharing
            else [
                Batch(b, 0)
                for b in cut_batches(
                    list(fresh_prompts),
                    {i: len(s) for i, s in fresh_prompts.items()},
                    batch_size=rows,
                    max_tokens=max_tokens,
                )
            ]
        )
        prefix_state: tuple[tuple[int, ...], list] | None = None
        with tqdm(total=len(todo), desc=desc, unit="prompt", mininterval=2) as bar:

            def record(items: list[int], logits: torch.Tensor) -> None:
                logprobs = torch.log_softmax(logits.float(), dim=-1)[:, label_ids].cpu().tolist()
                fresh = {keys[i]: lp for i, lp in zip(items, logprobs)}
                self.cache.put_many("choice_logprobs", fresh)
                cached.update(fresh)
                bar.update(len(items))

            rest = {i: len(encoded[i]) - stored[i][0] for i in stored}
            for batch in cut_batches(list(stored), rest, batch_size=rows, max_tokens=max_tokens):
                seqs, pasts = [encoded[i] for i in batch], [stored[i] for i in batch]
                pad = self.tokenizer.pad_token_id
                if self.batch_invariant:
                    logits = prefill_rows(self.model, seqs, pasts=pasts, cache_kwarg=self._cache_kwarg)[0]
                else:
                    logits = prefill(self.model, seqs, pad_id=pad, pasts=pasts, cache_kwarg=self._cache_kwarg).logits
                record(batch, logits)
            for batch in plan:
                past = None
                if batch.prefix:
                    head = tuple(encoded[batch.items[0]][: batch.prefix])
                    if prefix_state is None or prefix_state[0] != head:
                        prefix_state = (head, self._prefix_kv(head))
                    past = prefix_state[1]
                seqs = [encoded[i][batch.prefix :] for i in batch.items]
                record(batch.items, self._last_logits_backoff(seqs, past))
        return [cached[k] for k in keys]

    def _backend_results(self) -> CallCache:
        """The cache namespace of the backend's results (generations and scores): its own, per engine."""
        backend = self.generation_backend or self.scoring_backend
        if self._backend_cache is None:
            self._backend_cache = CallCache(self._cache_path, namespace=f"{self.fingerprint}-{backend.engine}")
        return self._backend_cache

    def _score_by_backend(
        self, prompts: Sequence[str], labels: Sequence[str], label_ids: list[int], desc: str
    ) -> list[list[float]]:
        """`choice_logprobs` by the scoring backend: uncached prompts go out as the token ids the in-process
        path would score; each finished group is cached as it arrives."""
        cache = self._backend_results()
        params = {"labels": list(labels)}
        keys = [cache_key(cache.namespace, str(self.torch_dtype), "choice_logprobs", p, params) for p in prompts]
        cached = cache.get_many(keys)
        todo = list({k: i for i, k in enumerate(keys) if k not in cached}.values())
        encoded = self._encode_many(todo, prompts)
        if any(not seq for seq in encoded.values()):
            raise ValueError("choice_logprobs got an empty prompt; it needs at least one token before the answer slot")
        if todo:
            with tqdm(total=len(todo), desc=desc, unit="prompt", mininterval=2) as bar:

                def finished(done: dict[int, list[float]]) -> None:
                    fresh = {keys[todo[j]]: logprobs for j, logprobs in done.items()}
                    cache.put_many("choice_logprobs", fresh)
                    cached.update(fresh)
                    bar.update(len(done))

                self.scoring_backend.score([encoded[i] for i in todo], label_ids, on_finished=finished)
            log.info("%s: %d prompts scored by %s", self.model_dir, len(todo), self.scoring_backend.describe())
        return [cached[k] for k in keys]

    def _prefix_kv(self, head: tuple[int, ...]) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """Key/value states of a shared prompt prefix, one sequence, per layer."""
        if self.batch_invariant:  # the pass that computes these tokens when a prompt runs alone
            cache = forward_packed(self.model, [list(head)], cache_kwarg=self._cache_kwarg)[1]
            return [(layer.keys, layer.values) for layer in cache.layers]
        ids = torch.tensor([head], dtype=torch.long, device=self.device)
        out = self.model(input_ids=ids, use_cache=True, logits_to_keep=1)
        past = out.cache if getattr(out, "cache", None) is not None else out.past_key_values
        return [(layer.keys, layer.values) for layer in past.layers]

    def _last_logits(self, seqs: list[list[int]], past: list | None) -> torch.Tensor:
        """Logits at the last token of each sequence (the answer slot), one padded forward pass."""
        if self.batch_invariant:
            shared = 0 if past is None else past[0][0].shape[-2]
            return forward_packed(self.model, seqs, start=shared, past=past, cache_kwarg=self._cache_kwarg)[0]
        ids, mask = left_pad(seqs, self.tokenizer.pad_token_id, self.device)
        positions = (mask.cumsum(-1) - 1).clamp(min=0)
        kwargs: dict[str, Any] = {}
        if past is not None:
            from transformers import DynamicCache

            n, shared = len(seqs), past[0][0].shape[-2]
            kwargs[self._cache_kwarg] = DynamicCache(
                ddp_cache_data=[(k.expand(n, -1, -1, -1), v.expand(n, -1, -1, -1)) for k, v in past],
                config=self.model.config,
            )
            mask = torch.cat([torch.ones((n, shared), dtype=mask.dtype, device=mask.device), mask], dim=1)
            positions = positions + shared
        # Left padding puts every answer slot at the last position: only its logits are needed.
        out = self.model(input_ids=ids, attention_mask=mask, position_ids=positions, logits_to_keep=1, **kwargs)
        return out.logits[:, -1, :]

    def _last_logits_backoff(self, seqs: list[list[int]], past: list | None) -> torch.Tensor:
        """`_last_logits`, halving the batch (and the token budget for later batches) on GPU out-of-memory."""
        try:
            return self._last_logits(seqs, past)
        except torch.OutOfMemoryError:
            if len(seqs) == 1:
                raise
            torch.cuda.empty_cache()
            width = max(len(s) for s in seqs)
            self._token_budget = max(width, (len(seqs) // 2) * width)
            log.warning("out of memory at %d x %d tokens; token budget now %d", len(seqs), width, self._token_budget)
            half = len(seqs) // 2
            return torch.cat(
                [self._last_logits_backoff(seqs[:half], past), self._last_logits_backoff(seqs[half:], past)]
            )

    def _scoring_budget(self, longest: int) -> int:
        """Padded tokens per scoring batch: batch_size x 512 on CPU; probed once on GPU when batch_size='auto'."""
        if self._token_budget is None:
            if self.device.startswith("cuda") and self._auto_batch and longest:
                self._token_budget = self.probe_batch_tokens(longest)
            else:
                self._token_budget = self._max_batch * 512
        return self._token_budget

    @torch.inference_mode()
    def probe_batch_tokens(self, width: int, limit: int = 1 << 16, headroom: float = 0.7) -> int:
        """Largest padded-token count per batch (batch x `width`) whose forward pass fits on the GPU.

        Doubles the batch until out-of-memory, the `limit`, or peak memory above `headroom` of the card,
        then keeps the largest batch that stayed under it.
        """
        free, total = torch.cuda.mem_get_info(self.device)
        rows, best = 1, width
        while rows * width <= limit:
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats(self.device)
            try:
                ids = torch.full((rows, width), self.tokenizer.pad_token_id, dtype=torch.long, device=self.device)
                self.model(input_ids=ids, logits_to_keep=1)
                torch.cuda.synchronize(self.device)
            except torch.OutOfMemoryError:
                break
            if torch.cuda.max_memory_allocated(self.device) > headroom * total:
                break
            best = rows * width
            rows *= 2
        torch.cuda.empty_cache()
        log.info(
            "batch probe: %d padded tokens per batch at width %d (%.0f GiB free of %.0f)",
            best,
            width,
            free / 2**30,
            total / 2**30,
        )
        return best

    def generate(
        self,
        conversations: Sequence[Messages],
        params: GenerationParams = GenerationParams(),
        *,
        desc: str = "generating",
    ) -> list[list[str]]:
        """Chat completions: one list of `params.num_samples` texts per conversation (one text when greedy)."""
        return [[r.text for r in replies] for replies in self.generate_replies(conversations, params, desc=desc)]

    def generate_replies(
        self,
        conversations: Sequence[Messages],
        params: GenerationParams = GenerationParams(),
        *,
        desc: str = "generating",
    ) -> list[list[Reply]]:
        """`generate`, each text with whether it stopped at `params.max_new_tokens` (`Reply.cut`).

        Each cached record says which engine wrote it and which replies hit the cap (`{"texts": [...],
        "cut": [...], "engine": ...}`); results of a generation backend live in their own cache namespace
        (see serving.py)."""
        return self.complete_replies([self.render_chat(m) for m in conversations], params, desc=desc)

    def complete(
        self, prompts: Sequence[str], params: GenerationParams = GenerationParams(), *, desc: str = "generating"
    ) -> list[list[str]]:
        """`generate` of prompts rendered already (`render_chat`, or a base model's `render_plain`): the texts
        that continue each prompt."""
        return [[r.text for r in replies] for replies in self.complete_replies(prompts, params, desc=desc)]

    @torch.inference_mode()
    def complete_replies(
        self, prompts: Sequence[str], params: GenerationParams = GenerationParams(), *, desc: str = "generating"
    ) -> list[list[Reply]]:
        """`generate_replies` of rendered prompts (`complete`)."""
        prompts = list(prompts)
        if self.generation_backend is not None:
            return self._generate_by_backend(prompts, params, desc)
        keys = [self._key("generate", p, {**params.key(), **self.chat.key()}) for p in prompts]
        cached = self.cache.get_many(keys)
        todo = list({k: i for i, k in enumerate(keys) if k not in cached}.values())
        encoded = self._encode_many(todo, prompts)
        lengths = {i: len(encoded[i]) for i in todo}
        unanswered = self.unanswered
        engine = f"in-process transformers {_transformers_version()} (numerics {NUMERICS_VERSION})"
        eos = self._eos_ids()
        per = params.num_samples if params.do_sample else 1
        # Sampling batches count rows (prompt x sample); a prompt's samples always share a batch.
        batches = cut_batches(todo, lengths, batch_size=max(1, self.batch_size // per))
        with tqdm(total=len(todo), desc=desc, unit="prompt", mininterval=2) as bar:
            for batch in batches:
                rows = [encoded[i] for i in batch for _ in range(per)]
                sampling = None
                if params.do_sample:
                    # Sample j of every prompt has its own seed: independent of batch composition.
                    seeds = [params.seed * 100_003 + j for _ in batch for j in range(per)]
                    sampling = Sampling(temperature=params.temperature, top_p=params.top_p, seeds=seeds)
                new = decode(
                    self.model,
                    rows,
                    max_new_tokens=params.max_new_tokens,
                    eos_ids=eos,
                    pad_id=self.tokenizer.pad_token_id,
                    sampling=sampling,
                    cache_kwarg=self._cache_kwarg,
                    store=self.prefix_store if self.prefix_store.max_bytes else None,
                    invariant=self.batch_invariant,
                )
                texts = self._decode(new)
                cut = [hit_cap(ids, params.max_new_tokens, eos) for ids in new]
                fresh = {
                    keys[i]: {
                        "texts": self._final(prompts[i], texts[j * per : (j + 1) * per]),
                        "cut": cut[j * per : (j + 1) * per],
                        "engine": engine,
                    }
                    for j, i in enumerate(batch)
                }
                self.cache.put_many("generate", fresh)
                cached.update(fresh)
                bar.update(len(batch))
        self._report_unanswered(unanswered, len(todo))
        return self._replies([cached[k] for k in keys])

    def _decode(self, new: Sequence[Sequence[int]]) -> list[str]:
        """Generated token ids to reply texts, whichever engine generated them (a reasoning model's keep the
        special tokens its final answer is read from: `_final`)."""
        return self.tokenizer.batch_decode(new, skip_special_tokens=not self.chat.keeps_special_tokens)

    def _replies(self, records: list[Any]) -> list[list[Reply]]:
        """The replies of cached generation records; counts each record's engine for the provenance (a bare
        list is a record of the in-process loop written before records named their engine, a record without
        `cut` one written before replies recorded their cap)."""
        from debate_audit.runtime.provenance import record_generations

        out, engines = [], {}
        for record in records:
            engine = record["engine"] if isinstance(record, dict) else "in-process transformers (unrecorded)"
            engines[engine] = engines.get(engine, 0) + 1
            out.append(record_replies(record))
        for engine, n in engines.items():
            self.generation_engines[engine] = self.generation_engines.get(engine, 0) + n
        record_generations(self.model_dir, engines)
        return out

    def _generate_by_backend(self, prompts: list[str], params: GenerationParams, desc: str) -> list[list[Reply]]:
        """`generate` through the generation backend: uncached prompts go out as the token ids the in-process
        path would decode from; each finished group of replies is cached as it arrives."""
        backend = self.generation_backend
        cache = self._backend_results()
        keys = [
            cache_key(cache.namespace, str(self.torch_dtype), "generate", p, {**params.key(), **self.chat.key()})
            for p in prompts
        ]
        cached = cache.get_many(keys)
        todo = list({k: i for i, k in enumerate(keys) if k not in cached}.values())
        unanswered = self.unanswered
        if todo:
            encoded = self._encode_many(todo, prompts)
            with tqdm(total=len(todo), desc=desc, unit="prompt", mininterval=2) as bar:

                def finished(done: dict[int, list[list[int]]]) -> None:
                    engine = backend.describe()
                    fresh = {
                        keys[todo[j]]: {
                            "texts": self._final(prompts[todo[j]], self._decode(samples)),
                            "cut": [hit_cap(ids, params.max_new_tokens, stop) for ids in samples],
                            "engine": engine,
                        }
                        for j, samples in done.items()
                    }
                    cache.put_many("generate", fresh)
                    cached.update(fresh)
                    bar.update(len(done))

                stop = self._eos_ids()
                backend.complete([encoded[i] for i in todo], params, stop_ids=stop, on_finished=finished)
            self._report_unanswered(unanswered, len(todo))
        return self._replies([cached[k] for k in keys])

    def _final(self, prompt: str, replies: Sequence[str]) -> list[str]:
        """The answers of one prompt's replies (chat.py); counts the replies of a reasoning model whose
        budget ran out before its answer (they give "")."""
        answers = [self.chat.final_answer(prompt, r) for r in replies]
        self.unanswered += sum(1 for a, r in zip(answers, replies) if not a and r.strip())
        return answers

    def _report_unanswered(self, before: int, calls: int) -> None:
        if self.unanswered > before:
            log.warning(
                "%s: %d of %d fresh generations end before a final answer (%s reasoning): they are "
                "empty; raise max_new_tokens",
                self.model_dir,
                self.unanswered - before,
                calls,
                self.chat.reasoning,
            )

    def _eos_ids(self) -> list[int]:
        ids = {self.tokenizer.eos_token_id}
        gen_eos = getattr(self._generation_config(), "eos_token_id", None)
        if isinstance(gen_eos, int):
            ids.add(gen_eos)
        elif gen_eos:
            ids.update(gen_eos)
        return sorted(i for i in ids if i is not None)

    def _generation_config(self) -> Any:
        """The model's generation config, without loading the weights when they are not loaded."""
        if self._model is not None:
            return self._model.generation_config
        from transformers import GenerationConfig

        try:
            return GenerationConfig.from_pretrained(self._base_dir or self.model_dir)
        except OSError:  # no generation_config.json: what transformers derives from config.json
            from transformers import AutoConfig

            return GenerationConfig.from_model_config(AutoConfig.from_pretrained(self._base_dir or self.model_dir))

    def close(self) -> None:
        for backend in {id(b): b for b in (self.generation_backend, self.scoring_backend) if b is not None}.values():
            backend.close()
        if self._backend_cache is not None:
            log.info(self._backend_cache.summary())
            self._backend_cache.close()
        log.info(self.cache.summary())
        if self.prefix_store.hits:
            log.info(
                "prompt prefix reuse: %d prompts started from stored states, %d tokens not recomputed",
                self.prefix_store.hits,
                self.prefix_store.reused_tokens,
            )
        self.prefix_store.clear()
        self.cache.close()
