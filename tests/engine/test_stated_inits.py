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
from typing import Any

import pytest

from queues.engine import compiled

# Dataclasses known to state their __init__; any other that does is checked too.
STATED = {
    "assign": {"QuotaCheck", "FlavorOutcome", "PodSetAssignment", "Assignment"},
    "outcomes": {"Preemption", "CycleResult", "Entry"},
    "replay_records": {"WorkloadRecord"},
    "victim_search": {"Target", "Candidate"},
}


def stated_inits() -> list[tuple[str, str, ast.FunctionDef]]:
    """(module, class, its __init__) for each dataclass of the compiled
    modules whose source states an __init__."""
    found = []
    for module in compiled.MODULES:
        tree = ast.parse((compiled.HERE / f"{module}.py").read_text())
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


def stand_in(annotation: str, namespace: dict[str, Any], serial: int, avoid: Any = None) -> Any:
    """A value of the annotated type (compiled, the constructor checks it)
    that is not ``avoid`` (the field's default): a fresh container, a
    numbered scalar, an enum member, or an instance of the class left empty."""
    kind = eval(annotation, namespace)
    if isinstance(kind, types.UnionType):
        kind = next(arm for arm in typing.get_args(kind) if arm is not type(None))
    kind = typing.get_origin(kind) or kind
    if kind is bool:
        return not avoid
    if kind in (str, int, float):
        return kind(1000 + serial)
    if isinstance(kind, type) and issubclass(kind, enum.Enum):
        return next(member for member in kind if member is not avoid)
    assert isinstance(kind, type), annotation
    if kind in (dict, list, set):
        return kind()
    made: Any = kind.__new__  # the class's own (a compiled class refuses object's)
    return made(kind)


def has_default(f: dataclasses.Field[Any]) -> bool:
    return f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING


def assert_given(value: Any, argument: Any, name: str) -> None:
    if isinstance(argument, (str, int, float)):  # compiled, unboxed and boxed anew
        assert value == argument and type(value) is type(argument), name
    else:
        assert value is argument, name


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
    assert "__post_init__" not in vars(cls), "a stated __init__ does not call __post_init__"

    with_default = parameters[len(parameters) - len(init.args.defaults) :]
    defaults = dict(zip(with_default, init.args.defaults, strict=True))
    for f in fields:
        stated = defaults.get(f.name)
        if f.default is not dataclasses.MISSING:
            assert stated is not None, f"{f.name}: the field has a default"
            value = eval(ast.unparse(stated), namespace)
            assert value == f.default and type(value) is type(f.default), f.name
        elif f.default_factory is not dataclasses.MISSING:
            # None stands for "a new one", made per instance.
            assert stated is not None and ast.unparse(stated) == "None", f.name
        else:
            assert stated is None, f"{f.name}: the field has no default"

    # Annotations read from the constructor: compiled, a field's own may be
    # only ``type``.
    annotations = [ast.unparse(a.annotation) for a in init.args.args[1:] if a.annotation]
    assert len(annotations) == len(fields), "every parameter annotated"

    # Only what has no default given: the defaults are set.
    given = [
        stand_in(annotation, namespace, serial)
        for serial, (f, annotation) in enumerate(zip(fields, annotations, strict=True))
        if not has_default(f)
    ]
    made, again = cls(*given), cls(*given)
    it = iter(given)
    own = getattr(made, "__dict__", None)  # pure Python, without slots
    for f in dataclasses.fields(cls):
        # Left unset, a field raises here compiled, and is not the instance's own
        # (a default read from the class) in pure Python.
        value = getattr(made, f.name)
        assert own is None or f.name in own, f"{f.name}: not set"
        if f.default is not dataclasses.MISSING:
            assert value == f.default and type(value) is type(f.default), f.name
        elif f.default_factory is not dataclasses.MISSING:
            assert value == f.default_factory(), f.name
            if isinstance(value, (dict, list, set)):
                assert value is not getattr(again, f.name), f"{f.name}: shared between instances"
        elif f.init:
            assert_given(value, next(it), f.name)

    # Every argument given, none its default: each is what is kept, by
    # keyword and by position alike.
    every = {
        f.name: stand_in(annotation, namespace, serial, f.default)
        for serial, (f, annotation) in enumerate(zip(fields, annotations, strict=True))
    }
    for made in (cls(**every), cls(*every.values())):
        for field_name, argument in every.items():
            assert_given(getattr(made, field_name), argument, field_name)
