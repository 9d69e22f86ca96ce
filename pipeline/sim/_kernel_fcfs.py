"""Placeholder."""


def run_fcfs(arrivals, first, config):
    return None
