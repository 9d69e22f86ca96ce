"""The exact kernel: what the asyncio engine computes, without running it (see :mod:`.run`)."""
