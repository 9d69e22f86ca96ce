"""Worked examples that notebooks import: real workloads on the unchanged engine.

:mod:`pipeline.examples.approval` is the approval queue: audit-carrying tasks,
CPU-bound scoring off the event loop, retries and dead letters.
"""
