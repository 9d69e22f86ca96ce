"""``python -m pipeline``: the command line (see :mod:`pipeline.cli`, one module per command)."""

from pipeline.cli import run_as_command

raise SystemExit(run_as_command())
