"""The engine's dataclasses that state their ``__init__`` (made by the million
in a replay; see ``queues.engine.compiled``) take and set what the generated
one would: every field the dataclass says its constructor takes, in order,
with the same defaults, and every field set."""

from __future__ import annotations

import ast
import dataclasses
import enum
import importlib
import types
import typing
from pathlib import Path
from typing import Any

import pytest

from queues.engine import compiled

ENGINE = Path(compiled.__file__).resolve().parent
# Dataclasses known to state their __init__; any other that does is checked too.
STATED = {
    "assign": {"QuotaCheck", "FlavorOutcome", "PodSetAssignment", "Assignment"},
    "outcomes": {"Pending", "Preemption", "CycleResult", "Entry"},
    "replay_records": {"WorkloadRecord"},
    "victim_search": {"Target", "Candidate"},
}


def stated_inits() -> list[tuple[str, str, ast.FunctionDef]]:
    """(module, class, its __init__) for each dataclass of the compiled
    modules whose source states an __init__."""
    found = []
    for module in compiled.MODULES:
        tree = ast.parse((ENGINE / f"{module}.py").read_text())
        for node in tree.body:
            if not isinstance(node, ast.ClassDef):
                continue
            decorators = [ast.unparse(d) for d in node.decorator_list]
            if not any(d.startswith("dataclass") for d in decorators):
                continue
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name == "__init__":
                    found.append((module, node.name, item))
    return found


def test_the_replays_hot_dataclasses_state_their_init() -> None:
    by_module: dict[str, set[str]] = {}
    for module, name, _ in stated_inits():
        by_module.setdefault(module, set()).add(name)
    for module, names in STATED.items():
        assert names <= by_module.get(module, set()), (module, names)


def stand_in(annotation: Any, namespace: dict[str, Any], serial: int) -> Any:
    """A value of the field's type (compiled, the constructor checks it)
    that no default equals: a fresh container, a numbered scalar, an enum's
    first member, or an instance of the class left empty."""
    # A string in pure Python (postponed annotations), the type itself compiled.
    kind = eval(annotation, namespace) if isinstance(annotation, str) else annotation
    if kind is type:  # compiled, what an optional field's annotation became
        return None
    if isinstance(kind, types.UnionType):
        kind = next(arm for arm in typing.get_args(kind) if arm is not type(None))
    kind = typing.get_origin(kind) or kind
    if kind is bool:
        return serial % 2 == 0
    if kind in (str, int, float):
        return kind(1000 + serial)
    if isinstance(kind, type) and issubclass(kind, enum.Enum):
        return next(iter(kind))
    assert isinstance(kind, type), annotation
    if kind in (dict, list, set):
        return kind()
    made: Any = kind.__new__  # the class's own (a compiled class refuses object's)
    return made(kind)


def required_arguments(cls: type, namespace: dict[str, Any]) -> list[Any]:
    return [
        stand_in(f.type, namespace, serial)
        for serial, f in enumerate(dataclasses.fields(cls))
        if f.init and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    ]


@pytest.mark.parametrize(
    ("module", "name", "init"),
    [pytest.param(m, n, i, id=f"{m}.{n}") for m, n, i in stated_inits()],
)
def test_a_stated_init_takes_and_sets_what_the_generated_one_would(
    module: str, name: str, init: ast.FunctionDef
) -> None:
    namespace = vars(importlib.import_module(f"queues.engine.{module}"))
    cls = namespace[name]
    fields = [f for f in dataclasses.fields(cls) if f.init]
    parameters = [a.arg for a in init.args.args[1:]]
    assert parameters == [f.name for f in fields], "the constructor's parameters, in order"
    assert not init.args.kwonlyargs and init.args.vararg is None and init.args.kwarg is None

    with_default = parameters[len(parameters) - len(init.args.defaults) :]
    defaults = dict(zip(with_default, init.args.defaults, strict=True))
    for f in fields:
        stated = defaults.get(f.name)
        if f.default is not dataclasses.MISSING:
            assert stated is not None, f"{f.name}: the field has a default"
            assert eval(ast.unparse(stated), namespace) == f.default, f.name
        elif f.default_factory is not dataclasses.MISSING:
            # None stands for "a new one", made per instance.
            assert stated is not None and ast.unparse(stated) == "None", f.name
        else:
            assert stated is None, f"{f.name}: the field has no default"

    given = required_arguments(cls, namespace)
    made, again = cls(*given), cls(*given)
    it = iter(given)
    own = getattr(made, "__dict__", None)  # pure Python, without slots
    for f in dataclasses.fields(cls):
        # Left unset, a field raises here compiled, and is not the instance's own
        # (a default read from the class) in pure Python.
        value = getattr(made, f.name)
        assert own is None or f.name in own, f"{f.name}: not set"
        if not f.init:
            continue
        if f.default is not dataclasses.MISSING:
            assert value == f.default, f.name
        elif f.default_factory is not dataclasses.MISSING:
            assert value == f.default_factory(), f.name
            if isinstance(value, (dict, list, set)):
                assert value is not getattr(again, f.name), f"{f.name}: shared between instances"
        else:
            argument = next(it)
            if isinstance(argument, (str, int, float)):  # compiled, unboxed and boxed anew
                assert value == argument, f.name
            else:
                assert value is argument, f.name
