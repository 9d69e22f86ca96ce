"""The exact kernel: what the asyncio engine computes, without running it.

:mod:`.run` runs a scenario inside the kernel's domain
(:mod:`pipeline.sim.running.engine_choice` says which are) by the
FCFS recursion (:mod:`.fcfs`), the event replay (:mod:`.events`) or, for a chain,
:mod:`.chain`; :mod:`.kinds` holds the event kinds as ints and :mod:`.report` the
``RunReport`` a kernel run hands back."""
