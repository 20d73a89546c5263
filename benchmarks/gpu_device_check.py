"""The device check (src/debate_audit/tools/device_check.py): does the paper path run on this GPU node?

    .venv/bin/python benchmarks/gpu_device_check.py                  # on the GPU, real widths, offline
    .venv/bin/python benchmarks/gpu_device_check.py --shape tiny --device cpu   # the CI run (tests/test_device_check.py)

One JSON line per part (environment, smoke, fsdp, gpt-oss, qwen3.5, mfu), also in $OUT/device_check.jsonl;
exit status 1 when a part fails. benchmarks/README.md ("Device check") holds a run's output.
"""

import sys

from debate_audit.tools.device_check import main

if __name__ == "__main__":
    sys.exit(main())
