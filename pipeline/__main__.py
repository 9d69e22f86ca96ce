"""``python -m pipeline``: the command line (see :mod:`pipeline.cli`, one module per command)."""

from pipeline.cli import main

raise SystemExit(main())
