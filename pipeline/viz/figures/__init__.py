"""Matplotlib figures: one run (:mod:`.run`, built from :mod:`.panels` over
:mod:`.series`), runs against theory (:mod:`.theory`), sweeps (:mod:`.sweep`), a
chain's stages (:mod:`.stages`), trade-offs (:mod:`.tradeoffs`), warm-up
(:mod:`.warmup`); :mod:`.style` and :mod:`.png` are their plumbing."""
