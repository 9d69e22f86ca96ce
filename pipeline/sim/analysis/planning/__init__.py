"""Capacity planning: SLOs and their judgement (:mod:`.slo`), the search for the
cheapest configuration that meets them (:mod:`.plan`), what it found (:mod:`.result`,
with its text in :mod:`.report` and its figure in :mod:`.figure`), and traffic windows
and fits to plan for (:mod:`.traffic`)."""
