"""Estimation helpers for simulation output: confidence intervals (:mod:`.intervals`,
with the skew-robust bounds in :mod:`.skewed`, fractions in :mod:`.proportions`,
quantiles in :mod:`.quantiles`, input checks in :mod:`.samples`, Student's t in
:mod:`.tdist`), run-length advice (:mod:`.runlength`) and statistics of step
functions (:mod:`.stepstats`).

The intervals a notebook or a study of its own runs needs are importable from here:
``from pipeline.sim.stats import mean_ci, proportion_ci``.
"""

from __future__ import annotations

from .intervals import (
    MeanCI,
    ProportionCI,
    QuantileCI,
    batch_means_ci,
    mean_bounds,
    mean_ci,
    paired_difference,
    proportion_bound,
    proportion_ci,
    quantile_ci,
    robust_mean_ci,
    summarise_values,
)

__all__ = [
    "MeanCI",
    "ProportionCI",
    "QuantileCI",
    "batch_means_ci",
    "mean_bounds",
    "mean_ci",
    "paired_difference",
    "proportion_bound",
    "proportion_ci",
    "quantile_ci",
    "robust_mean_ci",
    "summarise_values",
]
