"""Copy the pages that live elsewhere in the repository into the site's source folder.

Sphinx reads sources under ``docs/`` only, and it resolves a page's relative
links from where the page is: the notebooks link to ``../data/README.md`` and
to each other, and they read ``../data/*.csv`` when they run. Copies at the
same relative places (``docs/notebooks``, ``docs/data``, ``docs/bench``) keep
every link and path as it is in the repository; ``docs/notebooks/index.md``,
the notebooks' section page, is written here too. Three things change on the way:

- the solutions stay out of the site (a room pre-reads the exercises, not
  their answers): a link into ``notebooks/solutions/`` points to one page
  saying where they are;
- an exercise's check cell (``grader.check(...)``) keeps its code but not its output:
  run on a blank answer, it is a red failure on every exercise;
- a file a page links to that is not a page (``data/make_traces.py``) is
  copied too, so the link becomes a download rather than a broken reference,
  and so is a file a code cell names by a relative path (``"../docs/pipeline.svg"``),
  so the cell finds it when the page runs.

The copies are refreshed on every build (a file whose bytes did not change is
left alone, so Sphinx sees it unchanged), stale ones are removed, and git
ignores them all.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

__all__ = ["gather"]

#: (folder in the repository and under docs/, the page files to copy from it)
PAGES = (
    ("notebooks", ("*.ipynb",)),
    ("data", ("README.md",)),
    ("bench", ("RESULTS.md",)),
)
#: Files the notebooks read when they run, whether or not a cell names them literally.
DATA = ("data/*.csv", "data/*.json")
#: The folders under docs/ that hold only copies (ignored by git, cleaned of stale ones).
COPIED = ("notebooks", "data", "bench", "docs", "pipeline")
PAGE_SUFFIXES = {".md", ".ipynb"}
LINK = re.compile(r"\]\(([^)#\s]+)(#[^)\s]*)?\)")
RELATIVE_PATH = re.compile(r"""["'](\.\.?/[^"'\s]+)["']""")

NOTEBOOKS_PAGE = """\
# Notebooks

Each notebook runs in JupyterLab (`make lab`) with sliders, animations and
exercises that answer back; here they are as run once, with their figures. The
exercises' checks run in JupyterLab, after you answer: on this site their
answers are blank, so their checks are left out.

```{toctree}
:maxdepth: 1
:glob:

[0-9]*
solutions
```
"""
#: A code cell that runs an exercise's check: its output on the site is the check of a
#: blank answer, a red failure, so it is left out (myst-nb's ``remove-output`` tag).
CHECK_CELL = re.compile(r"^\s*grader\.check\(")
SOLUTIONS_PAGE = """\
# Solutions

Every notebook's exercises have worked answers in the repository, in
`notebooks/solutions/` (one notebook each, with the same name and
`-solutions`). They stay out of this site so that a room can pre-read the
exercises first; open them in JupyterLab (`make lab`) after trying.
"""


def _write(target: Path, data: bytes) -> None:
    if target.exists() and target.read_bytes() == data:
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(data)


def _relink(text: str, page: Path, root: Path, docs: Path, wanted: set[Path]) -> str:
    """Point solution links at the solutions page; copy linked non-page files."""

    def replace(match: re.Match[str]) -> str:
        link, anchor = match.group(1), match.group(2) or ""
        if "://" in link or link.startswith("mailto:"):
            return match.group(0)
        target = (page.parent / link).resolve()
        try:
            inside = target.relative_to(root)
        except ValueError:
            return match.group(0)
        if inside.parts[:2] == ("notebooks", "solutions"):
            solutions = docs / "notebooks" / "solutions.md"
            here = (docs / page.relative_to(root)).parent
            return f"]({Path(os.path.relpath(solutions, here)).as_posix()})"
        if target.is_file() and target.suffix not in PAGE_SUFFIXES:
            copy = docs / inside
            _write(copy, target.read_bytes())
            wanted.add(copy)
        return f"]({link}{anchor})"

    return LINK.sub(replace, text)


def _copy_named(code: str, page: Path, root: Path, docs: Path, wanted: set[Path]) -> None:
    """Copy the repository files a code cell names by a relative path."""
    for name in RELATIVE_PATH.findall(code):
        target = (page.parent / name).resolve()
        if target.is_file() and target.is_relative_to(root):
            copy = docs / target.relative_to(root)
            _write(copy, target.read_bytes())
            wanted.add(copy)


def _page(source: Path, root: Path, docs: Path, wanted: set[Path]) -> bytes:
    if source.suffix == ".md":
        return _relink(source.read_text(), source, root, docs, wanted).encode()
    notebook = json.loads(source.read_text())
    for cell in notebook["cells"]:
        text = "".join(cell["source"])
        if cell["cell_type"] == "markdown":
            cell["source"] = _relink(text, source, root, docs, wanted).splitlines(keepends=True)
        elif cell["cell_type"] == "code":
            _copy_named(text, source, root, docs, wanted)
            if CHECK_CELL.match(text):
                tags = cell.setdefault("metadata", {}).setdefault("tags", [])
                tags.append("remove-output")
    return (json.dumps(notebook, indent=1, ensure_ascii=False) + "\n").encode()


def gather(root: Path, docs: Path) -> None:
    """Copy the pages and data from ``root`` into ``docs``; remove copies whose source is gone."""
    wanted: set[Path] = set()
    for folder, patterns in PAGES:
        for pattern in patterns:
            for source in sorted((root / folder).glob(pattern)):
                target = docs / source.relative_to(root)
                _write(target, _page(source, root, docs, wanted))
                wanted.add(target)
    for pattern in DATA:
        for source in sorted(root.glob(pattern)):
            target = docs / source.relative_to(root)
            _write(target, source.read_bytes())
            wanted.add(target)
    for name, text in (("solutions.md", SOLUTIONS_PAGE), ("index.md", NOTEBOOKS_PAGE)):
        page = docs / "notebooks" / name
        _write(page, text.encode())
        wanted.add(page)
    for folder in COPIED:
        for stale in (docs / folder).rglob("*"):
            if stale.is_file() and stale not in wanted:
                stale.unlink()
