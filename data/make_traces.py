"""Regenerate the arrival traces in data/ (deterministic: fixed seeds).

Run: ``python data/make_traces.py``. See data/README.md for what each trace is.
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

from pipeline.sim import LogNormal, OnOff, Poisson
from pipeline.sim.workloads.arrivals import daily_curve

HERE = Path(__file__).parent


def write(name: str, columns: dict[str, np.ndarray], decimals: dict[str, int]) -> None:
    path = HERE / name
    keys = list(columns)
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(keys)
        for row in zip(*(columns[k] for k in keys), strict=True):
            writer.writerow(
                [
                    f"{v:.{decimals[k]}f}" if k in decimals else int(v)
                    for k, v in zip(keys, row, strict=True)
                ]
            )
    print(f"{path.name}: {len(columns[keys[0]])} rows")


def day_morning_peak(seed: int = 20261101) -> None:
    """One day of approval requests: 0.1/s at night, 1.2/s at the 09:30 peak."""
    rng = np.random.default_rng(seed)
    arrivals = daily_curve(0.1, 1.2, 9.5, width_h=2.5).times(rng, duration_s=86_400.0)
    service = LogNormal(mean=2.0, cv=1.0).sample(rng, len(arrivals))
    write(
        "day_morning_peak.csv",
        {"arrival_s": arrivals, "service_s": service},
        {"arrival_s": 3, "service_s": 4},
    )


def incident_burst(seed: int = 20261102) -> None:
    """Two hours of steady traffic with bursty retries from an upstream incident."""
    rng = np.random.default_rng(seed)
    steady = Poisson(rate=2.0).times(rng, duration_s=7_200.0)
    burst = (
        OnOff(rate_on=12.0, rate_off=0.0, mean_on_s=60.0, mean_off_s=600.0).times(
            rng, duration_s=3_600.0
        )
        + 1_800.0
    )
    arrivals = np.sort(np.concatenate([steady, burst]))
    service = LogNormal(mean=0.5, cv=0.8).sample(rng, len(arrivals))
    fails = (
        rng.random(len(arrivals))
        < np.where((arrivals > 1_800.0) & (arrivals < 5_400.0), 0.25, 0.02)
    ).astype(int)
    write(
        "incident_burst.csv",
        {"arrival_s": arrivals, "service_s": service, "fails": fails},
        {"arrival_s": 3, "service_s": 4},
    )


def llm_batch(seed: int = 20261103) -> None:
    """A nightly batch of 3,000 LLM prompts submitted over 5 minutes; multi-second calls."""
    rng = np.random.default_rng(seed)
    arrivals = np.sort(rng.uniform(0.0, 300.0, 3_000))
    tokens = np.clip(rng.lognormal(np.log(1_200), 0.6, len(arrivals)), 100, 8_000).round()
    # Latency grows with the tokens generated: ~1.5 s + 2 ms per token, with noise.
    service = (1.5 + 0.002 * tokens) * rng.lognormal(0.0, 0.3, len(arrivals))
    write(
        "llm_batch.csv",
        {"arrival_s": arrivals, "service_s": service, "tokens": tokens},
        {"arrival_s": 3, "service_s": 3},
    )


def handler_durations(seed: int = 20261104) -> None:
    """2,000 measured handler durations: median 50 ms, p99 1.2 s, as a dashboard shows."""
    rng = np.random.default_rng(seed)
    durations = LogNormal.from_quantiles(p50=0.05, p99=1.2).sample(rng, 2_000)
    write("handler_durations.csv", {"duration_s": durations}, {"duration_s": 4})


def requests_per_minute(seed: int = 20261105) -> None:
    """An hour of requests counted per minute: about 50/s, rising to 60/s mid-hour."""
    rng = np.random.default_rng(seed)
    minute = np.arange(60)
    rate_per_s = 50.0 + 10.0 * np.exp(-(((minute - 30) / 8.0) ** 2))
    write(
        "requests_per_minute.csv",
        {"minute": minute, "count": rng.poisson(rate_per_s * 60.0)},
        {},
    )


if __name__ == "__main__":
    day_morning_peak()
    incident_burst()
    llm_batch()
    handler_durations()
    requests_per_minute()
