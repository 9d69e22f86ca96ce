"""Chains: stages joined by bounded queues (:mod:`.chain`), one stage (:mod:`.stage`),
the hand-offs and batches between them (:mod:`.handoff`) and the accounts a chain
hands back (:mod:`.report`). ``pipeline.Chain`` and ``pipeline.Stage`` are the public names."""
