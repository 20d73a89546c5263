"""The device check (src/debate_audit/tools/device_check.py): does the paper path run on this GPU node?

    python3 benchmarks/gpu_device_check.py                          # on the GPU, real widths, offline
    python3 benchmarks/gpu_device_check.py --shape tiny --device cpu   # the CI run (tests/test_device_check.py)

One JSON line per part (environment, smoke, fsdp, gpt-oss, qwen3.5, mfu), also in $OUT/device_check.jsonl;
each part under its own time limit (--budget PART=SECONDS); exit status 1 when a part fails or times out.
Needs torch and transformers alone, and no prepared model: on a bare GPU machine that gets the working tree,
run it with that machine's python3 (this file puts the repository's src/ on the path). benchmarks/README.md
("Device check") says what travels and holds a run's output.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from debate_audit.tools.device_check import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
