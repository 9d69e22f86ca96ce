"""Every code block of ``docs/guide/overload.md`` runs as written, and shows what it prints.

A file of its own, as each page that runs for long (:data:`tests.docs.page_runs.LONG`):
``--dist loadfile`` keeps a file's tests on one core.
"""

from __future__ import annotations

import pytest

from tests.docs.page_runs import check_page, pages


@pytest.mark.parametrize("page", pages("overload"))
def test_every_block_of_the_page_runs_as_written(page, tmp_path, monkeypatch):
    check_page(page, tmp_path, monkeypatch)
