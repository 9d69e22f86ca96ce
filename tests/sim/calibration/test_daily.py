"""fit_daily_curve recovers the daily curve that made the arrivals."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pipeline.sim.calibration.daily import fit_daily_curve
from pipeline.sim.workloads.arrivals import DailyCurve, daily_curve


def test_fit_daily_curve_recovers_the_curve_that_made_the_arrivals() -> None:
    truth = DailyCurve(0.2, 2.0, peak_hour=10.0, width_h=2.0)
    times = daily_curve(0.2, 2.0, 10.0, width_h=2.0).times(
        np.random.default_rng(1), duration_s=86_400.0
    )
    fitted = fit_daily_curve(times).rate_fn
    # Tolerance = the estimator's own bias + 4 standard errors, both from Poisson noise in
    # the 96 bins of 900 s: a bin at rate r holds Poisson(900 r) arrivals, so its rate has
    # standard error sqrt(r / 900). (A 300-day Monte Carlo of this fit, run once to check
    # the algebra, gave SEs 1.5%, 1.3%, 0.025 h, 1.4% and biases -4.5%, -0.3%, +0.06 h,
    # +2.5%: in line with the figures below.)
    bin_s = 900.0

    def rate_se(rate: float, bins: int = 1) -> float:
        return math.sqrt(rate / bin_s / bins)

    # base: the median of the quietest 24 bins, drawn from the ~40 bins at the base rate
    # (180 +- 13.4 arrivals, 7.5% per bin), is their 30th percentile, z = -0.52: biased
    # 0.52 * 7.5% = 3.9% low; the order statistic's SE is
    # 7.5% * sqrt(0.3 * 0.7 / 40) / phi(-0.52) = 1.55%. Bias rounded up to 5%.
    base_se = rate_se(0.2) / 0.2 * math.sqrt(0.3 * 0.7 / 40) / 0.348
    assert fitted.base_rate == pytest.approx(truth.base_rate, rel=0.05 + 4 * base_se)
    # peak: the highest 3-bin mean, SE sqrt(2 / (3 * 900)) = 1.36% at 2/s; averaging the
    # bump over 45 min lowers it 0.7%, taking the larger of the two bins beside 10:00 raises
    # it about 0.5%: |bias| < 1%.
    peak_se = rate_se(2.0, bins=3) / 2.0
    assert fitted.peak_rate == pytest.approx(truth.peak_rate, rel=0.01 + 4 * peak_se)
    # peak_hour: the excess-weighted mean hour. Its SE is
    # sqrt(sum_h (h - 10)^2 Var(excess_h)) / sum_h excess_h = sqrt(0.67) / 37 = 0.022 h,
    # where the sum over 4 bins/h of d^2 * rate / 900 is 144 from the bump and about 460
    # from the clipped noise of the base bins (half their variance), and the bump's
    # excess is 1.8 * 2 h * sqrt(2 pi) * 4 bins/h = 36 rate-bins. Bias: that clipped noise
    # (0.011/s per base bin, ~60 bins, 1.8% of the mass) sits around 14:00, pulling the
    # mean 1.8% * 4 h = 0.07 h later.
    assert fitted.peak_hour == pytest.approx(truth.peak_hour, abs=0.07 + 4 * 0.022)
    # width_h = area / (peak - base) / sqrt(2 pi): the area's SE is sqrt(50,000) / 900 /
    # 36 = 0.7%, peak - base's 1.5%; the same noise moves both, so SE <= 1.5%. Bias: the
    # clipped base-bin noise adds 1.8% to the area and the low base another 0.5%: +2.5%.
    assert fitted.width_h == pytest.approx(truth.width_h, rel=0.025 + 4 * 0.015)


def test_fit_daily_curve_start_s_moves_the_clock() -> None:
    times = daily_curve(0.2, 2.0, 10.0, width_h=2.0).times(
        np.random.default_rng(2), duration_s=86_400.0
    )
    plain = fit_daily_curve(times).rate_fn
    shifted = fit_daily_curve(times, start_s=8 * 3600).rate_fn
    assert shifted.peak_hour == pytest.approx(plain.peak_hour - 8.0)
    assert shifted(np.array([0.0]))[0] == pytest.approx(plain(np.array([8 * 3600.0]))[0])


def test_fit_daily_curve_needs_enough_times_within_a_day() -> None:
    with pytest.raises(ValueError, match="at least 100"):
        fit_daily_curve([1.0, 2.0])
    with pytest.raises(ValueError, match="within one day"):
        fit_daily_curve(np.linspace(0, 100_000, 200))
