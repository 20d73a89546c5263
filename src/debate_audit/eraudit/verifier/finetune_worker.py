"""One worker of a fine-tuning job that `distributed.launch` started under torchrun:
`python -m debate_audit.eraudit.verifier.finetune_worker ARGS.json`."""

from __future__ import annotations

import json
import logging
import os
import sys
from pathlib import Path

from debate_audit.models.loading import ModelRef
from debate_audit.runtime.provenance import continued_provenance

from .finetune import FinetuneSettings, finetune_verifier


def worker(args_file: str | Path) -> None:
    """One worker of a `launch`ed job: `finetune_verifier` with the arguments the rule's process wrote, in
    that rule's provenance; rank 0 logs at INFO, the others only warnings."""
    rank = os.environ.get("RANK", "0")
    logging.basicConfig(
        level=logging.INFO if rank == "0" else logging.WARNING,
        stream=sys.stderr,
        format=f"%(asctime)s %(levelname)s rank {rank} %(name)s: %(message)s",
    )
    arguments = json.loads(Path(args_file).read_text())
    provenance = arguments.pop("provenance")
    arguments["base"] = ModelRef.from_params(arguments["base"])
    arguments["settings"] = FinetuneSettings(**arguments["settings"])
    with continued_provenance(provenance):
        finetune_verifier(**arguments)


if __name__ == "__main__":
    worker(sys.argv[1])
