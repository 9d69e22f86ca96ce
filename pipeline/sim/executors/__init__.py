"""Where independent simulations run: a local process pool (:mod:`.pool`, guarded by
:mod:`.main_guard`), a Dask cluster (:mod:`.cluster`), and an executor that remembers
runs (:mod:`.run_cache`)."""
