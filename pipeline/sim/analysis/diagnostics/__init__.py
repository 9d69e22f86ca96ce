"""Diagnostics: the classic failure modes of a run (:mod:`.diagnose`, detectors in
:mod:`.checks` over the quantities in :mod:`.facts`, vocabulary in :mod:`.findings`),
a chain's bottleneck (:mod:`.bottleneck`) and theory's verdict on an overloaded
configuration (:mod:`.stability`)."""
