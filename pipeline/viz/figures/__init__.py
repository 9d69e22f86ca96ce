"""Matplotlib figures: one run (:mod:`.run`, built from :mod:`.panels` over
:mod:`.series`), runs against theory (:mod:`.theory`), sweeps (:mod:`.sweep`), a
chain's stages (:mod:`.stages`), trade-offs (:mod:`.tradeoffs`), warm-up
(:mod:`.warmup`), a plan's frontier (:mod:`.plan`) and its sensitivity's tornado
(:mod:`.tornado`); :mod:`.style` and :mod:`.png` are their plumbing."""
