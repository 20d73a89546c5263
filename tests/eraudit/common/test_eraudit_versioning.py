"""Content ids of prompts, filters and selection rules: they change with the text they hash, and each rule
carries the ids of exactly what it uses."""

import re

from conftest import REPO

from debate_audit.eraudit.audit import sweeps, verdicts
from debate_audit.eraudit.common.versioning import rule_id
from debate_audit.eraudit.debate import debates, selection, splits
from debate_audit.eraudit.paraphrase import pools as paraphrase
from debate_audit.eraudit.paraphrase import prompts as paraphrase_prompts
from debate_audit.eraudit.verifier import adjudication, training_rows


def _f(x):
    return x + 1


def _g(x):
    return x + 2


def test_rule_id_hashes_texts_and_function_sources():
    assert rule_id("r", "a", _f) == rule_id("r", "a", _f)
    assert rule_id("r", "a", _f) != rule_id("r", "b", _f)
    assert rule_id("r", "a", _f) != rule_id("r", "a", _g)
    assert rule_id("r", "ab", "c") != rule_id("r", "a", "bc")  # parts are length-prefixed
    assert re.fullmatch(r"r:[0-9a-f]{12}", rule_id("r", {"k": [1, 2]}))


def test_debate_prompt_id_covers_the_reminder_and_the_scratchpad_texts():
    parts = [
        debates.SYSTEM_TEMPLATE,
        debates.PRIVATE_NOTE,
        debates.ROUND_REMINDER,
        debates.USER_TEMPLATE,
        debates.SCRATCHPAD_STRUCTURE,
        debates.THINKING_STEPS,
        debates.SCRATCHPAD_REQUEST,
        debates.TRUNCATION_MARKER,
        debates.debater_messages,
        debates._THINKING_BLOCK.pattern,
        debates.public_argument,
        debates.slot_text,
        debates.debater_replies,
        debates.render_rounds,
        debates.render_transcript,
        debates.clean_argument,
        debates.enforce_word_limit,
        debates.mark_quotes,
        debates.quote_key,
        debates.run_debates,
    ]
    assert rule_id("debate", *parts) == debates.PROMPT_VERSION
    for index in (2, 6):  # the reminder, the scratchpad request
        changed = list(parts)
        changed[index] = changed[index] + " "
        assert rule_id("debate", *changed) != debates.PROMPT_VERSION


RULE_IDS = {
    "debate_split": ["split_version"],
    "debate_generate": ["prompt_version"],
    "debate_select": ["selection_version", "readout_version"],
    "debate_gcg": ["gcg_version", "readout_version"],
    "verifier_adjudicate": ["adjudication_version"],
    "verifier_finetune": ["training_items_version", "readout_version"],
    "audit_statistics": ["statistics_version"],
    "audit_sweeps": ["sweeps_version"],
    "audit_figures": ["figures_version"],
}


def _rule_blocks():
    blocks = {}
    for path in (REPO / "rules").glob("*.smk"):
        text = path.read_text()
        # rules may sit inside an if/else (rules/debate.smk): a block ends at the next line as far left
        for match in re.finditer(r"^( *)rule (\w+):\n(.*?)(?=^\1\S|\Z)", text, re.S | re.M):
            blocks[match.group(2)] = match.group(3)
    return blocks


def test_each_rule_carries_the_ids_of_what_it_uses_and_no_other():
    blocks = _rule_blocks()
    every = {name for names in RULE_IDS.values() for name in names if name != "readout_version"}
    for rule, names in RULE_IDS.items():
        params = set(re.findall(r"^\s+(\w+_version)=", blocks[rule], re.M))
        assert set(names) <= params, rule
        assert not (params & every) - set(names), rule
    paraphrase_rules = (REPO / "rules" / "paraphrase.smk").read_text()
    assert 'prompt_version=prompt_id(PARAPHRASE["prompt"])' in paraphrase_rules
    assert "pool_version=PARAPHRASE_POOL_VERSION" in paraphrase_rules
    # distinct ids per module
    ids = [
        debates.PROMPT_VERSION,
        selection.SELECTION_VERSION,
        splits.SPLIT_VERSION,
        paraphrase.POOL_VERSION,
        paraphrase_prompts.prompt_id("paper"),
        paraphrase_prompts.prompt_id("project"),
        training_rows.training_items_id("argument"),
        training_rows.training_items_id("adjudication"),
        adjudication.ADJUDICATION_VERSION,
        verdicts.STATISTICS_VERSION,
        sweeps.SWEEPS_VERSION,
    ]
    assert len(set(ids)) == len(ids)
