"""GCG's editable vocabulary refuses every control token, the way the ER-Audit release does
(gcg/objective.py _forbidden_special_ids): the named special ids and every added token marked special."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tokenizers import AddedToken, Tokenizer, models, pre_tokenizers
from transformers import AutoTokenizer

from debate_audit.eraudit.debate.gcg import allowed_token_ids

WORDS = ["hello", "world", "the", "a"]
# gpt-oss's harmony control tokens and a few of its reserved ids: added tokens marked special, of which its
# tokenizer_config.json names only bos / eos / pad as special tokens.
BOS, EOS, PAD = "<|startoftext|>", "<|return|>", "<|endoftext|>"
HARMONY = ["<|start|>", "<|end|>", "<|message|>", "<|channel|>", "<|constrain|>", "<|call|>", "<|endofprompt|>"]
RESERVED = ["<|reserved_200000|>", "<|reserved_200001|>", "<|reserved_200004|>", "<|reserved_200009|>"]
CONTROL = [BOS, PAD, *RESERVED, EOS, *HARMONY]


@pytest.fixture(scope="module")
def harmony_tokenizer(tmp_path_factory):
    """A tiny gpt-oss-style tokenizer: a word-level vocabulary plus the control tokens, saved and loaded the way
    a downloaded model's is (tokenizer.json + tokenizer_config.json with its added_tokens_decoder)."""
    out: Path = tmp_path_factory.mktemp("harmony-tokenizer")
    backend = Tokenizer(models.WordLevel({w: i for i, w in enumerate(WORDS)}, unk_token=WORDS[0]))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    backend.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in CONTROL])
    backend.save(str(out / "tokenizer.json"))
    added = {
        str(backend.token_to_id(t)): {
            "content": t,
            "special": True,
            "lstrip": False,
            "rstrip": False,
            "normalized": False,
            "single_word": False,
        }
        for t in CONTROL
    }
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": BOS,
        "eos_token": EOS,
        "pad_token": PAD,
        "added_tokens_decoder": added,
    }
    (out / "tokenizer_config.json").write_text(json.dumps(config))
    return AutoTokenizer.from_pretrained(out)


def test_smollm2_special_added_tokens_3_to_16_are_not_editable(embedded_model_dir):
    tokenizer = AutoTokenizer.from_pretrained(embedded_model_dir)
    allowed = set(allowed_token_ids(tokenizer, len(tokenizer)))
    assert not allowed & set(range(3, 17))
    assert {tokenizer.added_tokens_decoder[i].content for i in (3, 13)} == {"<repo_name>", "<jupyter_code>"}
    assert allowed & set(range(17, 1000)), "ordinary tokens stay editable"


def test_harmony_control_and_reserved_tokens_are_not_editable(harmony_tokenizer):
    tokenizer = harmony_tokenizer
    control_ids = {tokenizer.convert_tokens_to_ids(t) for t in CONTROL}
    # the case the named special ids miss: each control token but bos / eos / pad is editable by that rule
    # alone, and survives the text round trip (an added token's text encodes back to its own id)
    assert set(tokenizer.all_special_ids) == {tokenizer.convert_tokens_to_ids(t) for t in (BOS, EOS, PAD)}
    assert tokenizer(HARMONY + RESERVED, add_special_tokens=False)["input_ids"] == [
        [tokenizer.convert_tokens_to_ids(t)] for t in HARMONY + RESERVED
    ]
    allowed = allowed_token_ids(tokenizer, len(tokenizer))
    assert not set(allowed) & control_ids
    assert allowed == [tokenizer.convert_tokens_to_ids(w) for w in WORDS]
