"""Route a Snakemake script's output (prints, warnings, logging, tqdm) into its rule's log file."""

from __future__ import annotations

import contextlib
import logging
import sys
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def to_log(path: str | Path) -> Iterator[logging.Logger]:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", buffering=1) as fh:
        handler = logging.StreamHandler(fh)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        root = logging.getLogger()
        root.addHandler(handler)
        previous_level = root.level
        root.setLevel(logging.INFO)
        try:
            with contextlib.redirect_stdout(fh), contextlib.redirect_stderr(fh):
                try:
                    yield logging.getLogger("debate_audit")
                except Exception:
                    # Snakemake shows only the log path; the traceback must be in the log itself.
                    logging.getLogger("debate_audit").exception("stage failed")
                    raise
        finally:
            root.removeHandler(handler)
            root.setLevel(previous_level)
            sys.stdout.flush()
