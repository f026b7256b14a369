"""Which engine modules mypyc compiles, and whether their build may be used.

``scripts/build_engine.py`` (run by ``make install``) compiles ``MODULES``
into extension modules beside their sources and writes ``MANIFEST``: a hash of
every input of the build (each engine source, compiled or not, and
``DEPENDS``), and the Python it was built for. ``queues.engine`` imports the
compiled modules only while that manifest matches the inputs as they are now
and ``BERTH_PURE_ENGINE`` is not set. Otherwise every module runs from its
source: compiled modules call each other directly, and were built knowing the
others' types, so one edited module would still be called as it was built.

Both give the same answers (``tests/engine/test_compiled_engine.py``); the
compiled one replays Kueue's perf scenarios 1.5-1.9 times as fast and the month
trace of ``bench/replay_scale.py`` about 3 times (README).

A dataclass the replay makes by the million (a quota check, a nomination's
entry, a workload's record) states its ``__init__``. Compiled, the one
``dataclasses`` generates stays interpreted, is called with its arguments
packed in a tuple and a dict, and in a frozen class sets each field through
``object.__setattr__`` as a Python call: 5 to 12 times the cost of a stated
one (``tests/engine/test_stated_inits.py`` holds each to its fields).

Pure Python: no Django, no kubernetes client.
"""

from __future__ import annotations

import hashlib
import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib.machinery import ModuleSpec
from pathlib import Path
from types import ModuleType

PACKAGE = "queues.engine"
HERE = Path(__file__).resolve().parent
MANIFEST_NAME = "native.json"
MANIFEST = HERE / MANIFEST_NAME
SUFFIX = importlib.machinery.EXTENSION_SUFFIXES[0]
PURE_SWITCH = "BERTH_PURE_ENGINE"
# The library every compiled module loads (scripts/build_engine.py's group name).
SHARED_LIBRARY = "native__mypyc"
ROOT = HERE.parent.parent
# Besides the engine's own sources, what a build is made from: what the engine
# imports from the rest of the project, and the build itself.
DEPENDS = tuple(
    (name, ROOT / name)
    for name in (
        "queues/errors.py",
        "queues/names.py",
        "queues/quantity.py",
        "queues/quota_rules.py",
        "queues/rules.py",
        "scripts/build_engine.py",
    )
)

# A replay's path through the engine, with model.py's workloads and policies
# (read millions of times a replay; its frozen classes copied and pickled by
# their fields, ``frozen_copies``). Not compiled: this module and the
# package's __init__ (they choose), and what a replay does not run through:
# reading scenarios, charts, capacity searches, explanations.
MODULES = (
    "admission_fairness",
    "arrivals",
    "assign",
    "events",
    "fair_order",
    "fair_preemption",
    "fairshare",
    "first_candidates",
    "gang_fit",
    "groups",
    "heap_calls",
    "messages",
    "model",
    "nomination_memory",
    "outcomes",
    "partial",
    "placement",
    "preemption",
    "queueing",
    "quota",
    "replay_records",
    "scheduler",
    "scheduler_state",
    "settling",
    "simulator",
    "standing_block",
    "topology",
    "unparking",
    "usage_meter",
    "victim_search",
    "witness",
)


@dataclass(frozen=True)
class Choice:
    compiled: bool
    why: str


def _digest(path: Path) -> str:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return "missing"


def input_hashes(
    directory: Path = HERE, depends: Sequence[tuple[str, Path]] = DEPENDS
) -> dict[str, str]:
    """What a build is made from: every source in ``directory``, compiled or
    not (mypyc builds what it knows of the modules it does not compile, their
    fields' types, into those it does), and ``depends``."""
    hashes = {path.name: _digest(path) for path in sorted(directory.glob("*.py"))}
    hashes.update((name, _digest(path)) for name, path in depends)
    return hashes


def expected_manifest(
    directory: Path = HERE,
    modules: Sequence[str] = MODULES,
    depends: Sequence[tuple[str, Path]] = DEPENDS,
) -> dict[str, object]:
    return {
        "python": sys.implementation.cache_tag,
        "suffix": SUFFIX,
        "modules": sorted(modules),
        "inputs": input_hashes(directory, depends),
    }


def _switch(environ: Mapping[str, str]) -> str | None:
    """Why the switch forces pure Python, if it does. Read like every Berth
    setting: the variable, else the file ``BERTH_PURE_ENGINE_FILE`` names
    (controlplane.env; the engine may not import it)."""
    name = PURE_SWITCH
    value = environ.get(name)
    if value is None and environ.get(f"{name}_FILE"):
        name = f"{name}_FILE"
        try:
            value = Path(environ[name]).read_text(encoding="utf-8")
        except OSError:
            # Start-up stops on this with a configuration error; a process
            # without the settings check takes the safe engine.
            return f"pure Python: {name} cannot be read"
    if value is not None and value.strip().lower() in ("1", "true", "yes", "on"):
        return f"pure Python: {name} is set"
    return None


def choose(
    directory: Path = HERE,
    environ: Mapping[str, str] = os.environ,
    modules: Sequence[str] = MODULES,
    depends: Sequence[tuple[str, Path]] = DEPENDS,
) -> Choice:
    """Whether the compiled modules in ``directory`` may be imported, and why not."""
    switch = _switch(environ)
    if switch is not None:
        return Choice(False, switch)
    try:
        built = json.loads((directory / MANIFEST_NAME).read_text())
    except (OSError, ValueError):
        built = None
    if not isinstance(built, dict):
        return Choice(False, "pure Python: not compiled (make install compiles it)")
    if built.get("failed"):
        return Choice(False, "pure Python: it could not be compiled (make install says why)")
    if built.get("python") != sys.implementation.cache_tag or built.get("suffix") != SUFFIX:
        return Choice(False, "pure Python: compiled for another Python; run make install")
    if built.get("modules") != sorted(modules):
        return Choice(False, "pure Python: compiled from another list of modules; run make install")
    for name in (*modules, SHARED_LIBRARY):
        if not (directory / f"{name}{SUFFIX}").exists():
            return Choice(False, f"pure Python: {name}{SUFFIX} is missing; run make install")
    was = built.get("inputs")
    now = input_hashes(directory, depends)
    if not isinstance(was, dict):
        was = {}
    changed = sorted(name for name in was.keys() | now.keys() if was.get(name) != now.get(name))
    if changed:
        shown = ", ".join(changed[:3]) + (
            f" and {len(changed) - 3} more" if len(changed) > 3 else ""
        )
        return Choice(
            False,
            f"pure Python: {shown} changed since it was compiled; run make install",
        )
    return Choice(True, f"compiled with mypyc ({len(modules)} modules)")


class SourcesFirst(importlib.abc.MetaPathFinder):
    """Imports ``package``'s modules from their sources, except ``allowed``:
    Python would otherwise prefer an extension module beside a source."""

    def __init__(self, package: str, directory: Path, allowed: frozenset[str]) -> None:
        self.prefix = package + "."
        self.directory = directory
        self.allowed = allowed

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None,
        target: ModuleType | None = None,
    ) -> ModuleSpec | None:
        if not fullname.startswith(self.prefix):
            return None
        name = fullname[len(self.prefix) :]
        if "." in name or name in self.allowed:
            return None
        source = self.directory / f"{name}.py"
        if not source.exists():
            return None
        return importlib.util.spec_from_file_location(fullname, source)


def install(choice: Choice) -> None:
    """Put the finder for this package first, once per process."""
    allowed = frozenset(MODULES) if choice.compiled else frozenset()
    for finder in sys.meta_path:
        if isinstance(finder, SourcesFirst) and finder.prefix == PACKAGE + ".":
            finder.allowed = allowed
            return
    sys.meta_path.insert(0, SourcesFirst(PACKAGE, HERE, allowed))
