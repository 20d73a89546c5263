"""`python -m debate_audit`: the `debate-audit` command (cli.py)."""

import sys

from debate_audit.cli import main

sys.exit(main())
