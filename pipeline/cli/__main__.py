"""``python -m pipeline.cli``: the same command line as ``python -m pipeline``."""

from pipeline.cli import run_as_command

raise SystemExit(run_as_command())
