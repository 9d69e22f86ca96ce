"""The chi-square upper tail without scipy, and the two tests built on it."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pipeline.sim.stats.chisquare import chi2_goodness_of_fit, chi2_sf, dispersion_test


@pytest.mark.parametrize(
    ("x", "df", "p"),
    [
        (3.841458820694124, 1, 0.05),  # the classic 5% points (scipy.stats.chi2.ppf(0.95, df))
        (18.307038053275146, 10, 0.05),
        (1073.6426506574246, 999, 0.05),
        (0.0, 4, 1.0),
        (2.0, 2, math.exp(-1.0)),  # df = 2 is an exponential of mean 2
        (50.0, 2, math.exp(-25.0)),
        (0.5, 3, 0.9188914116546758),
    ],
)
def test_the_upper_tail_meets_known_values(x, df, p):
    assert chi2_sf(x, df) == pytest.approx(p, rel=1e-9, abs=1e-300)


def test_the_upper_tail_refuses_no_degrees_of_freedom():
    with pytest.raises(ValueError, match="df must be > 0"):
        chi2_sf(1.0, 0)
    assert math.isnan(chi2_sf(math.nan, 3))


def test_the_dispersion_test_of_equal_counts_and_of_too_few():
    assert dispersion_test(np.full(10, 7.0)).statistic == 0.0
    assert dispersion_test(np.full(10, 7.0)).p_value == 1.0
    assert dispersion_test(np.array([5.0])) == (0.0, 0, 1.0)
    assert dispersion_test(np.zeros(4)).df == 0


def test_goodness_of_fit_merges_small_cells_and_counts_its_degrees():
    observed = np.array([1.0, 2.0, 30.0, 40.0, 25.0, 2.0])
    expected = np.array([1.5, 1.5, 31.0, 39.0, 24.0, 3.0])
    test = chi2_goodness_of_fit(observed, expected, fitted_parameters=1)
    # Cells: [1+2+30], [40], [25+2] (the last short cell joins its neighbour): df = 3 - 1 - 1.
    assert test.df == 1
    want = (33 - 34) ** 2 / 34 + (40 - 39) ** 2 / 39 + (27 - 27) ** 2 / 27
    assert test.statistic == pytest.approx(want)
    assert chi2_goodness_of_fit(observed[:2], expected[:2], fitted_parameters=2).df == 0
