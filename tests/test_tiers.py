"""The fast tier's settings (:mod:`tests.tiers`): what it runs fewer of, and its environment."""

from __future__ import annotations

from tests import tiers


def test_the_fast_tier_runs_a_fifth_of_a_large_randomized_check_and_the_full_run_all(
    monkeypatch,
):
    monkeypatch.delenv("PIPELINE_TEST_TIER", raising=False)
    assert [tiers.examples(n) for n in (10, 150, 500)] == [10, 150, 500]
    monkeypatch.setenv("PIPELINE_TEST_TIER", "fast")
    assert [tiers.examples(n) for n in (10, 60, 150, 500)] == [10, 20, 30, 100]


def test_the_tier_keeps_bytecode_caches_and_says_it_is_the_fast_tier(monkeypatch):
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    monkeypatch.delenv("PIPELINE_TEST_TIER", raising=False)
    env = tiers.environment()
    assert "PYTHONDONTWRITEBYTECODE" not in env
    assert env["PIPELINE_TEST_TIER"] == "fast"
