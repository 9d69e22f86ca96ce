"""``python -m pipeline``: the command line (see :mod:`pipeline.cli`)."""

from pipeline.cli import main

raise SystemExit(main())
