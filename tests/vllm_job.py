"""A model job for tests/test_vllm.py, run as its own process so a test can kill it mid-call:

    python tests/vllm_job.py '<json: ref (ModelRef params), cache, prompts, max_new_tokens>'

It generates greedily for `prompts` numbered questions and prints the texts as JSON. vLLM starts its engine
in a separate process, so a script that may start one keeps its work under the `__main__` guard.
"""

from __future__ import annotations

import json
import logging
import sys

from debate_audit.models import GenerationParams, ModelRef, open_model


def questions(n: int) -> list[list[dict[str, str]]]:
    return [
        [
            {
                "role": "user",
                "content": f"Question {i}: name {i % 7 + 2} things that are {('red', 'cold', 'loud')[i % 3]}.",
            }
        ]
        for i in range(n)
    ]


def main(job: dict) -> None:
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(name)s %(message)s")
    with open_model(ModelRef.from_params(job["ref"]), cache=job["cache"]) as lm:
        out = lm.generate(questions(job["prompts"]), GenerationParams(max_new_tokens=job["max_new_tokens"]))
    print(json.dumps(out))


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
