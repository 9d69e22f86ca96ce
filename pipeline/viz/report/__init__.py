"""``report.html``: a plan as one self-contained page (:mod:`.page`), its sections
(:mod:`.sections`) and their escaped cells (:mod:`.cells`)."""
