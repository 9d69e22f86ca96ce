"""``python -m pipeline.cli``: the same command line as ``python -m pipeline``."""

from pipeline.cli import main

raise SystemExit(main())
