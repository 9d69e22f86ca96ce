"""Each notebook's saved prose values, held to the run the suite already makes of it.

nbval runs a notebook's code cells in one kernel, a test item per cell, and keeps
the kernel until the notebook's last item is done. This plugin adds one item after
each notebook's last cell, in that same kernel: it evaluates every inline
expression as jupyterlab-myst does and compares the values with those the
notebook carries (:func:`pipeline.lessons.prose.differences`: exactly, or within
the stated tolerance of a machine-dependent value). The notebook is not run a
second time. The repository's ``conftest.py`` loads this plugin.
"""

from __future__ import annotations

import pytest

ITEM_NAME = "prose values"


class ProseValues(pytest.Item):
    """The check of one notebook's saved prose values, run after its last cell."""

    def runtest(self) -> None:
        from pipeline.lessons.prose import differences, evaluate

        notebook_file = self.parent
        kernel = notebook_file.kernel
        if kernel is None or not kernel.is_alive() or notebook_file.timed_out:
            pytest.fail("the notebook's kernel did not finish its cells", pytrace=False)
        fresh = evaluate(kernel.kc, notebook_file.nb)
        problems = differences(self.path, notebook_file.nb, fresh)
        if problems:
            pytest.fail(
                "\n".join(problems)
                + "\nThe prose's saved values are not this run's: run `make prose` "
                "(python -m pipeline.lessons.prose) and commit the notebook.",
                pytrace=False,
            )

    def reportinfo(self):
        return self.path, None, f"{self.path.name}::{ITEM_NAME}"


@pytest.hookimpl(tryfirst=True)  # before -k and -m deselect: the item follows its notebook's
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not config.pluginmanager.has_plugin("nbval"):
        return
    from nbval.plugin import IPyNbFile

    last: dict[int, int] = {}
    for index, item in enumerate(items):
        if isinstance(item.parent, IPyNbFile):
            last[id(item.parent)] = index
    for index in sorted(last.values(), reverse=True):
        parent = items[index].parent
        items.insert(index + 1, ProseValues.from_parent(parent, name=ITEM_NAME))
