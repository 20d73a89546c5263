"""The similarity floor's embedding model (all-MiniLM-L6-v2 from its PyPI package), loaded for real."""

import pytest

from debate_audit.eraudit.paraphrase.embeddings import SentenceEmbedder


@pytest.mark.slow
def test_minilm_ranks_a_paraphrase_above_an_unrelated_question():
    embedder = SentenceEmbedder()
    original = "Why did Ravi object to the chief engineer's plan?"
    sims = embedder.similarity(
        [original] * 3,
        [original, "For what reason was Ravi against the plan of the chief engineer?", "How tall is Mount Everest?"],
    )
    assert sims[0] == pytest.approx(1.0, abs=1e-5)
    assert sims[1] > 0.6 > 0.3 > sims[2]
