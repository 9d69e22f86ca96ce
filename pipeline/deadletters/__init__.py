"""Dead letters out and back in: export, load and replay (:mod:`.export`), and the
faithful JSON encoding of payloads they use (:mod:`.jsoncodec`). The public names are
``pipeline.export_jsonl``, ``pipeline.export_csv``,
``pipeline.load_jsonl`` and ``pipeline.replay``."""
