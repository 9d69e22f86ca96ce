"""The exact kernel: what the asyncio engine computes, without running it.

:mod:`.run` runs a scenario inside the kernel's domain by the FCFS recursion
(:mod:`.fcfs`) or the one replay of the engine's steps (:mod:`.replay`, run by
:mod:`.driver`, compiled or plain as :mod:`.paths` says); :mod:`.report` builds
the reports a kernel run hands back."""
