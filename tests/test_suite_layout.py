"""The test suite's own rules: it mirrors the package, and no import can hide behind a skip."""

from __future__ import annotations

import re
from pathlib import Path

TESTS = Path(__file__).resolve().parent
# A skip on an import hides a broken module or a missing extra (``make test``
# installs every extra). Only missing outside binaries may skip, with a hint.
IMPORT_SKIP = re.compile(
    r"importorskip|except (ImportError|ModuleNotFoundError)[^\n]*:\s*\n\s*pytest\.skip"
)


def test_every_test_folder_is_a_package():
    # Without __init__.py two test files of one name in different folders collide.
    folders = {p.parent for p in TESTS.rglob("test_*.py")}
    assert [str(f) for f in sorted(folders) if not (f / "__init__.py").exists()] == []


def test_no_skip_hides_a_failed_import():
    offenders = [
        str(path.relative_to(TESTS))
        for path in TESTS.rglob("*.py")
        if path != Path(__file__).resolve() and IMPORT_SKIP.search(path.read_text())
    ]
    assert offenders == []


def test_test_folders_mirror_the_package():
    # Whole-suite folders that are not package parts.
    own = {"notebooks", "docs", "golden", "__pycache__"}
    package = TESTS.parent / "pipeline"
    for folder in sorted(p for p in TESTS.rglob("*") if p.is_dir()):
        parts = folder.relative_to(TESTS).parts
        if own & set(parts):
            continue
        if parts == ("core",):
            continue  # the engine core: the modules at the package's top level
        if parts[0] == "core":
            parts = parts[1:]  # a subpackage of the core (pipeline/overload): tests/core/overload
        assert (package.joinpath(*parts)).is_dir(), f"tests/{'/'.join(parts)} mirrors no package"
