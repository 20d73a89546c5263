"""ER-Audit part 2, paraphrases (`rules/paraphrase.smk`): the prompts asking for paraphrases of q_h, the
checks a paraphrase must pass, the search and test pools, and the sentence embedder of the similarity floor.
"""
