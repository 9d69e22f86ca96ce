"""A check reads as a check, and a headroom claims only what was shown.

- ``plan --check`` (``plan(check=True)``): the terminal, ``report.html`` and the
  JSON state the verdict, never a search's "chosen"; one judgement per SLO
  always, a configuration queueing theory rejects included.
- ``--headroom``: the factor claimed (``arrival_rate_factor``, the words, the
  page's headline) is the largest shown to meet every SLO, and the bracket is
  narrowed around factors left undecided instead of stopping at the first one.
"""

import json
import math

import pytest

from pipeline import PipelineConfig
from pipeline.cli import main
from pipeline.sim import Exponential, Poisson, Scenario, plan
from pipeline.sim.analysis.planning.candidate import Candidate
from pipeline.sim.analysis.planning.headroom import RELATIVE_WIDTH, HeadroomFactor, bracket_limit
from pipeline.sim.analysis.planning.judgement import Judgement
from pipeline.sim.analysis.planning.slo import SLO
from pipeline.sim.analysis.theory import mmc

RATE = 8.0
LIMIT = 0.5
CHECK_LIMIT = 0.25


def _command(items, seed, *flags):
    """``plan`` on Poisson(8) arrivals and Exponential(1) service, one process."""
    workload = f"--arrivals poisson:rate={RATE:g} --service exponential:mean=1 --processes 1"
    return ["plan", *workload.split(), "--items", str(items), "--seed", str(seed), *flags]


def _base(items, seed=1):
    return Scenario(
        arrivals=Poisson(rate=RATE),
        service=Exponential(mean=1.0),
        config=PipelineConfig(queue_maxsize=100, max_attempts=1),
        n_items=items,
        seed=seed,
    )


# -- headroom: the claim is the factor shown to meet ---------------------------------------


def _judged(verdict):
    """A judged factor, as the search reads it (its verdict, its failing SLO)."""
    slo = SLO.parse(f"wait_mean_s<={LIMIT}")
    j = Judgement(slo, 3, 0.0, 0.0, 0.0, verdict)
    return Candidate(-1, {}, verdict=verdict, judgements=(j,), values=[(0.0,)] * 3)


@pytest.mark.parametrize("meets_below, fails_from", [(1.40, 1.47), (1.05, 1.30), (2.2, 2.9)])
def test_an_undecided_factor_does_not_stop_the_bracket(meets_below, fails_from):
    # Verdicts as a plan near a limit gives them: a band of factors stays undecided.
    def judge_at(factor):
        if factor < meets_below:
            return _judged("meets")
        return _judged("fails" if factor >= fails_from else "undecided")

    h = bracket_limit(_judged("meets"), lambda scenario, f: f, judge_at)
    # The claim is the largest factor shown to meet, never an undecided one.
    assert h.factor == h.low < meets_below
    assert all(v == "meets" for f, v, _ in h.points if f <= h.low)
    # The ends moved up to the undecided band from both sides (2% or the 16 factors).
    assert h.low >= meets_below / (1 + RELATIVE_WIDTH) ** 2
    assert fails_from <= h.high <= fails_from * (1 + RELATIVE_WIDTH) ** 2
    assert h.undecided and all(h.low < f < h.high for f in h.undecided)
    assert len(h.points) <= 16
    assert "stayed undecided" in h.note


@pytest.mark.slow  # a plan of 5,000 items and its headroom: 3 s
def test_the_headroom_headline_states_the_factor_shown_to_meet(tmp_path, capsys):
    status = main(
        _command(
            5000,
            1,
            "--search",
            "concurrency=11..13",
            "--slo",
            f"wait_mean_s<={LIMIT}",
            "--headroom",
            "--json",
            "--out",
            str(tmp_path / "out"),
        )
    )
    payload = json.loads(capsys.readouterr().out)
    assert status == 0
    h = payload["headroom"]
    shown = [f for f, verdict, _ in h["points"] if verdict == "meets"]
    assert h["arrival_rate_factor"] == h["low"] == max(shown)
    assert h["service_time_factor"] == h["service_time_low"]
    assert all(h["low"] < f < (h["high"] or math.inf) for f in h["undecided"])
    # The words never claim more than was shown (rounded down).
    more = math.floor(100 * (h["low"] - 1) + 1e-9)
    assert f"You can take {more}% more traffic" in h["text"]
    assert f"every SLO shown to hold at x{h['low']:.4g}" in h["text"]
    page = (tmp_path / "out" / "report.html").read_text()
    assert f"up to {h['low']:.4g} × the arrival rate (shown)" in page
    # The exact Erlang C limit of the chosen configuration lies in the bracket.
    c = payload["chosen"]["concurrency"]
    exact = next(
        f / 1000 for f in range(1000, 3000) if mmc(RATE * f / 1000, 1.0, c).wait_mean_s > LIMIT
    )
    assert h["low"] <= exact <= h["high"] + 0.001


# -- a check reads as a check ---------------------------------------------------------------


def _check(tmp_path, concurrency, *extra):
    out = tmp_path / f"check{concurrency}"
    argv = _command(
        2000,
        2,
        "--slo",
        f"wait_mean_s<={CHECK_LIMIT}",
        "--slo",
        "memory_peak_bytes<=1e9",
        "--check",
        f"concurrency={concurrency}",
        "--out",
        str(out),
        *extra,
    )
    return argv, out


@pytest.mark.parametrize(
    "concurrency, verdict, status", [(12, "meets", 0), (9, "fails", 1), (7, "fails", 1)]
)
def test_a_check_reads_as_a_check_everywhere(tmp_path, capsys, concurrency, verdict, status):
    # c = 12 clearly meets, c = 9 clearly fails, c = 7 cannot keep up (load 8).
    assert mmc(RATE, 1.0, 12).wait_mean_s < CHECK_LIMIT / 5
    assert mmc(RATE, 1.0, 9).wait_mean_s > 2 * CHECK_LIMIT
    argv, out = _check(tmp_path, concurrency, "--cost", "worker_hour=1,wait_hour=10")
    assert main(argv) == status
    text = capsys.readouterr().out
    first = text.splitlines()[0]
    assert first.startswith(f"Check: {verdict} (exit {status})"), text
    assert f"concurrency={concurrency}" in first
    assert "chosen" not in text and "configurations meeting every SLO" not in text
    page = (out / "report.html").read_text()
    assert f"<title>Capacity check: {verdict}</title>" in page
    assert "Check: " in page and "Chosen:" not in page and "Search, cheapest first" not in page
    assert "configurations meeting every SLO" not in page and "Capacity plan" not in page
    assert "of the budget of 2,000 runs used" in page
    assert "The frontier" not in page and "the choice (a star)" not in page
    payload = json.loads((out / "plan.json").read_text())
    assert payload["verdict"] == verdict
    # One judgement per SLO, always, in the order given.
    judged = payload["judgements"]
    assert [j["slo"] for j in judged] == [
        f"wait_mean_s<={CHECK_LIMIT}",
        "memory_peak_bytes<=1000000000",
    ]
    assert judged[0]["verdict"] == ("meets" if verdict == "meets" else "fails")
    if concurrency == 7:  # rejected unrun: the wait fails, with the reason; memory unjudged
        assert judged[0]["note"].startswith("unstable: offered load 8 > concurrency 7")
        assert judged[1]["verdict"] == "undecided" and "not run" in judged[1]["note"]
        assert payload["note"].startswith("unstable")


def test_check_json_on_stdout_has_one_judgement_per_slo_when_unstable(tmp_path, capsys):
    argv, _ = _check(tmp_path, 7, "--json")
    assert main(argv) == 1
    payload = json.loads(capsys.readouterr().out)
    assert payload["verdict"] == "fails" and len(payload["judgements"]) == 2


def test_a_check_in_python_judges_one_configuration():
    base = _base(1000)
    p = plan(base, {"concurrency": [12]}, [f"wait_mean_s<={LIMIT}"], check=True, progress=False)
    assert p.check is not None and p.check.verdict == "meets" and p.check.exit_status == 0
    assert p.report().startswith("Check: meets (exit 0)")
    assert p.to_dict()["verdict"] == "meets"
    assert (
        plan(base, {"concurrency": [12]}, [f"wait_mean_s<={LIMIT}"], progress=False).check is None
    )
    with pytest.raises(
        ValueError, match=r"a check judges one configuration: search\['concurrency'\]"
    ):
        plan(base, {"concurrency": [11, 12]}, [f"wait_mean_s<={LIMIT}"], check=True)
    with pytest.raises(TypeError, match="check must be True or False"):
        plan(base, {"concurrency": [12]}, [f"wait_mean_s<={LIMIT}"], check="yes")


@pytest.mark.parametrize(
    ("low", "high", "held", "broken"),
    [(1.446, 1.483, 44, 49), (1.45, 1.5, 45, 50), (1.0, 1.01, 0, 1), (1.2999, None, 29, None)],
)
def test_headroom_in_percent_never_claims_more_than_was_shown(low, high, held, broken):
    # Held rounds down and broken rounds up: words built on them (the plan's sentence,
    # notebook 05's prose) stay inside the bracket the runs showed.
    room = HeadroomFactor(low, low, high, "wait_mean_s<=1" if high else None, None, ())
    assert (room.percent_held, room.percent_broken) == (held, broken)
    assert 1 + room.percent_held / 100 <= low
    if high is not None:
        assert 1 + room.percent_broken / 100 >= high
    assert HeadroomFactor(None, None, None, None, "could not run", ()).percent_held is None
