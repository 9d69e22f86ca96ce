"""The notebooks' focused widgets: one knob-sized question each, as a :class:`FocusedWidget`.

Each function takes the scenario its notebook already built and returns a
widget whose controls are that lesson's knobs:

- :func:`burst_widget` (01): burst size against ``maxsize`` and ``on_full``;
- :func:`knee_widget` (02): concurrency and load against Erlang C's knee;
- :func:`retry_widget` (03): ``p``, ``max_attempts``, backoff and jitter;
- :func:`drain_widget` (04): the drain timeout against the backlog at the stop;
- :func:`provider_widget` (06): concurrency against a provider's limits.

Every change re-simulates a modest number of items (the exact kernel runs all
but the last, whose provider model only the engine has; that one redraws its
figure in place and keeps the runs of settings it has shown) and redraws with
the previous run faded. The live run of notebook 07 is :mod:`~pipeline.viz.widgets.live_run`.
"""

from __future__ import annotations

import math
import warnings
from typing import TYPE_CHECKING, Any

import ipywidgets as widgets
import numpy as np

from pipeline.retry import Backoff
from pipeline.sim import (
    DrainTimeoutWarning,
    Exponential,
    IndependentFailures,
    NoFailures,
    Overload,
    Poisson,
    TimeVarying,
    simulate,
)
from pipeline.sim.workloads.failures import TokenQuota

from .._units import human_bytes
from ..viz.figures.panels import LEGEND_FONT_PT, DepthPanel, LagPanel, MemoryPanel, legend_below
from ..viz.figures.series import memory_bound_bytes
from ..viz.figures.style import COLORS
from ..viz.figures.tradeoffs import plot_drain_tradeoff
from ..viz.widgets.focused import FocusedWidget, slider
from .provider_figure import ProviderPanels

if TYPE_CHECKING:
    from pipeline.sim import Scenario

__all__ = ["burst_widget", "drain_widget", "knee_widget", "provider_widget", "retry_widget"]

_FADED = {"alpha": 0.3}
#: Runs a widget keeps by settings (notebook 06: about 0.3 MB each, pickled).
_KEPT_RUNS = 32


def _toggle(description: str, options: list[Any], value: Any) -> widgets.ToggleButtons:
    return widgets.ToggleButtons(
        options=options,
        value=value,
        description=description,
        style={"description_width": "initial"},
    )


def _log_slider(description: str, value: float, low: float, high: float) -> widgets.FloatLogSlider:
    return widgets.FloatLogSlider(
        value=value,
        base=10,
        min=math.log10(low),
        max=math.log10(high),
        step=0.05,
        readout_format=".3g",
        description=description,
        continuous_update=False,
        style={"description_width": "initial"},
    )


# -- 01: where a burst goes -----------------------------------------------------------------


def burst_arrivals(burst_items: int, *, quiet_rate: float = 1.0, burst_s: float = 30.0):
    """Quiet traffic with one burst of about ``burst_items`` extra items from t = 60 s.

    The rate steps from ``quiet_rate`` up by ``burst_items / burst_s`` for
    ``burst_s`` seconds (ramps of 0.5 s), then back; runs last 300 s.
    """
    extra = burst_items / burst_s
    times = [0, 60, 60.5, 60.5 + burst_s, 61 + burst_s, 300]
    rates = [quiet_rate, quiet_rate, quiet_rate + extra, quiet_rate + extra, quiet_rate, quiet_rate]
    return TimeVarying.from_profile(times, rates)


def burst_widget(scenario: Scenario) -> FocusedWidget:
    """Burst size against ``maxsize`` and ``on_full``: queue depth and memory (notebook 01).

    ``scenario`` gives the pipeline, service times and item size; its arrivals
    are replaced by a quiet stream with one burst (:func:`burst_arrivals`).
    """
    cfg = scenario.config
    controls = {
        "burst_items": slider("burst (items)", 300, 0, 1500, 50),
        "maxsize": _log_slider("maxsize", cfg.queue_maxsize or 50, 10, 5000),
        "on_full": _toggle("on_full", ["block", "reject"], cfg.on_full),
    }
    base = scenario.replace(duration_s=300.0, n_items=None, drain_timeout_s=None)

    def run(s):
        return simulate(
            base.replace(
                arrivals=burst_arrivals(s["burst_items"]),
                queue_maxsize=round(s["maxsize"]),
                on_full=s["on_full"],
            )
        )

    def draw(axes, result, previous):
        DepthPanel(axes[0]).draw(result, previous)
        MemoryPanel(axes[1], title="Memory").draw(result, previous)
        axes[0].set_title("Where the burst waits")

    def summarise(result):
        s = result.summary
        return [
            ("peak queue", f"{s['queue_depth_max']}"),
            ("peak upstream backlog", f"{s['upstream_backlog_max']}"),
            ("shed", f"{s['items_shed']} of {s['items_offered']}"),
            ("peak memory", human_bytes(s["memory_peak_bytes"])),
            ("bound", human_bytes(memory_bound_bytes(result))),
            ("p95 wait from arrival", f"{s['wait_p95_s']:.3g} s"),
        ]

    return FocusedWidget(controls, run, draw, summarise=summarise, title="One burst")


# -- 02: the knee ---------------------------------------------------------------------------


def knee_widget(scenario: Scenario, *, n_items: int = 4000, replications: int = 4) -> FocusedWidget:
    """Concurrency and arrival rate against Erlang C's mean wait (notebook 02).

    Left: mean wait against concurrency at this load, Erlang C's curve and the
    simulated mean with its 95% interval; right: the same wait against
    utilisation at this concurrency -- the knee -- with the simulated point on it.
    Service times are exponential with ``scenario``'s mean.
    """
    mean = float(getattr(scenario.service, "mean", 1.0))
    rate = float(getattr(scenario.arrivals, "rate", 3.2))
    controls = {
        "concurrency": slider("concurrency", scenario.config.concurrency, 1, 16),
        "arrival_rate": slider("arrival rate (items/s)", rate, 0.5, 12.0, 0.1),
    }
    # No drain timeout: past the knee the slowest waits come last, and Erlang C counts them.
    base = scenario.replace(
        service=Exponential(mean), n_items=n_items, duration_s=None, drain_timeout_s=None
    )

    def run(s):
        sc = base.replace(concurrency=s["concurrency"], arrivals=Poisson(rate=s["arrival_rate"]))
        return sc, simulate(sc, replications=replications).interval("wait_mean_s")

    def draw(axes, result, previous):
        from pipeline.sim import theory

        sc, c = result[0], result[0].config.concurrency
        lam = sc.arrivals.rate
        load = lam * mean
        workers = np.arange(max(math.floor(load) + 1, 1), 17)
        axes[0].plot(
            workers,
            [theory.mmc(lam, mean, k).wait_mean_s for k in workers],
            "k-",
            label="Erlang C (M/M/c)",
        )
        rho = np.linspace(0.3, 0.97, 80)
        axes[1].plot(
            rho,
            [theory.mmc(r * c / mean, mean, c).wait_mean_s for r in rho],
            "k-",
            label=f"Erlang C, {c} workers",
        )
        for pair, style in ((previous, _FADED), (result, {})):
            if pair is None:
                continue
            run_sc, run_ci = pair
            k, u = (
                run_sc.config.concurrency,
                run_sc.arrivals.rate * mean / run_sc.config.concurrency,
            )
            for ax, x in ((axes[0], k), (axes[1], u)):
                ax.errorbar(
                    [x],
                    [max(run_ci.mean, 1e-4)],
                    yerr=[run_ci.half_width],
                    fmt="o",
                    capsize=3,
                    color="C0",
                    label=None if style else "simulated, 95% CI",
                    **style,
                )
        axes[0].set(
            yscale="log",
            xlabel="concurrency (workers)",
            ylabel="mean wait (s)",
            title=f"Mean wait at {lam:.3g} items/s",
        )
        axes[1].set(
            xlabel="utilisation ρ",
            ylabel="mean wait (s)",
            title="The knee",
            xlim=(0.25, max(1.0, load / c + 0.05)),
        )
        axes[1].set_ylim(bottom=0)
        for ax in axes:
            legend_below(ax, ncols=2)

    def summarise(result):
        from pipeline.sim import theory

        sc, ci = result
        c, lam = sc.config.concurrency, sc.arrivals.rate
        rho = lam * mean / c
        expected = f"{theory.mmc(lam, mean, c).wait_mean_s:.3g} s" if rho < 1 else "none: ρ ≥ 1"
        return [
            ("utilisation ρ", f"{rho:.2f}"),
            ("simulated mean wait", f"{ci.mean:.3g} ± {ci.half_width:.2g} s"),
            ("Erlang C", expected),
        ]

    widget = FocusedWidget(controls, run, draw, summarise=summarise, title="Workers and the knee")
    return widget


# -- 03: retries ----------------------------------------------------------------------------


def retry_widget(scenario: Scenario, *, n_items: int = 3000) -> FocusedWidget:
    """``p``, ``max_attempts``, backoff and jitter: attempts and latency (notebook 03)."""
    cfg = scenario.config
    p = scenario.failures.p if isinstance(scenario.failures, IndependentFailures) else 0.3
    controls = {
        "p": slider("failure probability p", p, 0.0, 0.9, 0.05),
        "max_attempts": slider("max_attempts", cfg.max_attempts, 1, 10),
        "backoff_s": _log_slider("backoff base (s)", max(cfg.backoff.base_s, 0.1), 0.1, 30),
        "jitter": _toggle("jitter", [False, True], bool(cfg.backoff.jitter)),
    }
    base = scenario.replace(n_items=n_items)

    def run(s):
        backoff = Backoff(
            base_s=s["backoff_s"], factor=2.0, cap_s=max(30.0, s["backoff_s"]), jitter=s["jitter"]
        )
        failures = IndependentFailures(s["p"]) if s["p"] > 0 else NoFailures()
        return simulate(
            base.replace(failures=failures, max_attempts=s["max_attempts"], backoff=backoff)
        )

    def draw(axes, result, previous):
        k = result.scenario.config.max_attempts
        p = getattr(result.scenario.failures, "p", 0.0)
        bins = np.arange(0.5, k + 1.5)
        admitted = max(result.summary["items_admitted"], 1)
        counts = np.histogram(result.columns.attempts, bins=bins)[0] / admitted
        axes[0].bar(range(1, k + 1), counts, width=0.8, color=COLORS["retry"], label="simulated")
        expected = [p ** (j - 1) * (1 - p) if j < k else p ** (k - 1) for j in range(1, k + 1)]
        axes[0].plot(
            range(1, k + 1),
            expected,
            "k_",
            markersize=18,
            mew=2,
            label="theory: pʲ⁻¹(1 − p), last pᵏ⁻¹",
        )
        axes[0].set(
            xlabel="attempts per item",
            ylabel="share of items",
            xticks=range(1, k + 1),
            ylim=(0, 1.05),
            title="What retries cost",
        )
        legend_below(axes[0], ncols=2)
        LagPanel(axes[1]).draw(result, previous)
        axes[1].set_title("Latency: what backoff adds")

    def summarise(result):
        from pipeline.sim import theory

        s = result.summary
        p, k = getattr(result.scenario.failures, "p", 0.0), result.scenario.config.max_attempts
        admitted = max(s["items_admitted"], 1)
        return [
            ("attempts per item", f"{s['attempts_total'] / admitted:.3f}"),
            ("(1 − pᵏ)/(1 − p)", f"{theory.retry_amplification(p, k):.3f}" if p < 1 else "n/a"),
            ("dead-lettered", f"{s['items_dead_lettered'] / admitted:.2%}"),
            ("pᵏ", f"{p**k:.2%}"),
            ("p95 latency", f"{s['latency_p95_s']:.3g} s"),
        ]

    return FocusedWidget(controls, run, draw, summarise=summarise, title="Retries")


# -- 04: the drain --------------------------------------------------------------------------

_TIMEOUTS = (0, 10, 30, 60, 120, 180, None)


def drain_widget(scenario: Scenario) -> FocusedWidget:
    """The drain timeout against the backlog at the stop (notebook 04).

    The arrival rate sets how much work is left when intake stops; the drain
    timeout how much of it is finished. Left: the run, with the stop and the
    drain's end marked; right: every timeout of the trade-off at this rate,
    the current one ringed.
    """
    rate = float(getattr(scenario.arrivals, "rate", 0.16))
    timeout = scenario.config.drain_timeout_s
    controls = {
        "drain_timeout_s": slider(
            "drain_timeout_s", 30 if timeout is None else timeout, 0, 300, 10
        ),
        "arrival_rate": slider("arrival rate (items/s): the backlog", rate, 0.05, 0.25, 0.01),
    }

    def run(s):
        sc = scenario.replace(arrivals=Poisson(rate=s["arrival_rate"]))
        current = s["drain_timeout_s"]
        with warnings.catch_warnings():
            # Cutting the drain short is the lesson; the figure counts what it left.
            warnings.simplefilter("ignore", DrainTimeoutWarning)
            runs = {t: simulate(sc.replace(drain_timeout_s=t)) for t in _TIMEOUTS}
            runs.setdefault(current, simulate(sc.replace(drain_timeout_s=float(current))))
        return runs[current], runs, current

    def draw(axes, result, previous):
        run_, runs, current = result
        DepthPanel(axes[0]).draw(run_, None if previous is None else previous[0])
        stop = float(run_.columns.arrival_s.max(initial=0))
        axes[0].axvline(stop, color="black", lw=1)
        axes[0].axvline(run_.summary["sim_time_s"], color="black", ls=":", lw=1)
        axes[0].annotate(
            "intake stops",
            (stop, 1),
            xycoords=("data", "axes fraction"),
            xytext=(-4, -4),
            textcoords="offset points",
            ha="right",
            va="top",
            fontsize=LEGEND_FONT_PT,
        )
        axes[0].set_title("The run: stop, then the drain")
        plot_drain_tradeoff(
            runs, ax=axes[1], highlight=current, title="Every timeout, this backlog"
        )

    def summarise(result):
        run_, _, _ = result
        s = run_.summary
        at = run_.series
        stop = float(run_.columns.arrival_s.max(initial=0))
        i = max(int(np.searchsorted(at.time_s, stop, side="right")) - 1, 0)
        backlog = int(at.queue_depth[i] + at.in_flight[i] + at.retry_waiting[i])
        return [
            ("inside at the stop", f"{backlog}"),
            ("unfinished", f"{s['items_unfinished']} of {s['items_offered']}"),
            ("shutdown", f"{s['sim_time_s'] - stop:.0f} s"),
            ("drain timed out", "yes" if s["drain_timed_out"] else "no"),
        ]

    return FocusedWidget(controls, run, draw, summarise=summarise, title="Drain")


# -- 06: a provider's limits ----------------------------------------------------------------


def provider_widget(
    workload: Any,
    tokens: Any,
    *,
    limit: int = 24,
    tokens_per_minute: float = 400_000,
    config: Any = None,
    n_items: int = 400,
) -> FocusedWidget:
    """Concurrency against a provider's in-flight limit and token quota (notebook 06).

    Replays the first ``n_items`` items of a recorded batch (``workload``, from
    ``load_trace``; ``tokens`` per item) against ``Overload(limit) |
    TokenQuota(tokens_per_minute)``. Left: calls in flight against the limit;
    right: completed and dead-lettered items over time.

    Only the asyncio engine runs this provider model, and past the knee each
    prompt makes about five attempts, so a change costs tens of milliseconds of
    simulation: the figure is redrawn in place (kept axes, see
    :class:`~pipeline.lessons.provider_figure.ProviderPanels`) and the runs of
    recently visited settings are kept (replays are deterministic).
    """
    controls = {
        "concurrency": slider("concurrency", 16, 4, 64, 4),
        "limit": slider("provider's in-flight limit", limit, 8, 48, 4),
    }
    # Built once: checking every token count costs more than a refused call's simulation.
    quota = TokenQuota(tokens_per_minute, tokens, refuse_s=0.2)

    def run(s):
        provider = Overload(limit=s["limit"], refuse_s=0.2) | quota
        sc = workload.scenario(config, failures=provider, n_items=n_items)
        return simulate(sc.replace(concurrency=s["concurrency"]))

    def summarise(result):
        s = result.summary
        admitted = max(s["items_admitted"], 1)
        return [
            ("completed", f"{s['items_completed']} of {s['items_offered']}"),
            ("dead-lettered", f"{s['items_dead_lettered']}"),
            ("attempts per prompt", f"{s['attempts_total'] / admitted:.2f}"),
            ("done after", f"{s['sim_time_s']:.0f} s"),
        ]

    return FocusedWidget(
        controls,
        run,
        ProviderPanels(n_items).draw,
        summarise=summarise,
        title="Against the provider",
        clear_axes=False,
        keep_runs=_KEPT_RUNS,
    )
