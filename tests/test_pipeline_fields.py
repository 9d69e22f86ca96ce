"""A pipeline's state is declared once: every field its three files touch is in PipelineFields."""

from __future__ import annotations

import ast
from pathlib import Path

import pipeline.attempts
import pipeline.engine
import pipeline.fields
import pipeline.intake
from pipeline import Pipeline
from pipeline.fields import PipelineFields

DECLARED = set(PipelineFields.__annotations__)


def touched(module) -> dict[str, set[str]]:
    """Every ``self.NAME`` in each class of ``module``, read or written."""
    tree = ast.parse(Path(module.__file__).read_text())
    found: dict[str, set[str]] = {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            found[node.name] = {
                sub.attr
                for sub in ast.walk(node)
                if isinstance(sub, ast.Attribute)
                and isinstance(sub.value, ast.Name)
                and sub.value.id == "self"
            }
    return found


def methods(cls: type) -> set[str]:
    return {name for klass in cls.__mro__ for name, value in vars(klass).items() if callable(value)}


async def handle(payload: int) -> int:
    return payload


def test_init_fills_exactly_the_declared_fields():
    assert set(vars(Pipeline(handle))) == DECLARED


def test_every_field_the_parts_touch_is_declared():
    known = DECLARED | methods(Pipeline) | {"__class__"}
    for module, name in (
        (pipeline.intake, "Intake"),
        (pipeline.attempts, "Attempts"),
        (pipeline.engine, "Pipeline"),
    ):
        assert sorted(touched(module)[name] - known) == [], name


def test_the_engine_methods_the_halves_call_are_declared_for_readers():
    source = Path(pipeline.fields.__file__).read_text()
    called = {
        attr
        for module, name in ((pipeline.intake, "Intake"), (pipeline.attempts, "Attempts"))
        for attr in touched(module)[name]
        if attr in vars(Pipeline)
    }
    assert called, "the halves call engine methods"
    for attr in sorted(called):
        assert f"def {attr}(" in source, attr


def test_the_parts_share_one_base_and_keep_a_plain_instance_dict():
    assert issubclass(pipeline.intake.Intake, PipelineFields)
    assert issubclass(pipeline.attempts.Attempts, PipelineFields)
    # Annotations only: no slots, no class-level defaults, no properties on the hot paths.
    assert "__slots__" not in vars(PipelineFields)
    assert not DECLARED & set(vars(PipelineFields))
    assert hasattr(Pipeline(handle), "__dict__")
