"""Capacity planning: SLOs and their judgement (:mod:`.slo`), the search for the
cheapest configuration that meets them (:mod:`.plan`: its arguments checked in
:mod:`.arguments`, its rounds walked in :mod:`.walk`, its outcome read in
:mod:`.decision`), what it found (:mod:`.result`, its parts in :mod:`.records`, its text
in :mod:`.report`), how fragile the answer is (:mod:`.sensitivity`, moving inputs with
:mod:`.perturb`), and which points of a sweep meet an SLO (:mod:`.slo_table`). Nothing
here draws: a plan's figures and its page are :mod:`pipeline.viz`'s (``figures.plan``,
``figures.tornado``, ``report``)."""
