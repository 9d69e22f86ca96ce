"""Capacity planning: SLOs and their judgement (:mod:`.slo`), the search for the
cheapest configuration that meets them (:mod:`.plan`), what it found (:mod:`.result`,
with its text in :mod:`.report`, its figure in :mod:`.figure` and its shareable page in
:mod:`.html_report`), how fragile the answer is (:mod:`.sensitivity`, moving inputs with
:mod:`.perturb`, drawn by :mod:`.tornado`), and which points of a sweep meet an SLO
(:mod:`.slo_table`)."""
