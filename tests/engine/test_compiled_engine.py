"""The engine compiled with mypyc (queues.engine.compiled, scripts/build_engine.py):
it is used only when built from exactly the sources there are, it can be
switched off, and it answers as the pure engine does.

No database: plain Python, and two subprocesses for the comparison."""

from __future__ import annotations

import ast
import copy
import json
import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

import queues.engine
from queues.engine import compiled
from queues.engine.assign import Assignment, Mode, PodSetAssignment
from queues.engine.compiled import SUFFIX, Choice, SourcesFirst, choose, expected_manifest
from queues.engine.experiment import workload_stream
from queues.engine.scenario import load
from queues.engine.simulator import Simulator

ROOT = Path(__file__).resolve().parents[2]
MODULES = ("alpha", "beta")


def _built(directory: Path) -> list[tuple[str, Path]]:
    """A build of two modules, beside one left interpreted and with one input
    outside the package, as scripts/build_engine.py leaves it; its ``depends``."""
    outside = directory.parent / f"{directory.name}-outside"
    outside.mkdir()
    depends = [("outside/types.py", outside / "types.py")]
    depends[0][1].write_text("Amount = int\n")
    for name in (*MODULES, "gamma"):
        (directory / f"{name}.py").write_text(f"NAME = {name!r}\n")
    for name in (*MODULES, compiled.SHARED_LIBRARY):
        (directory / f"{name}{SUFFIX}").write_bytes(b"not really a library")
    (directory / compiled.MANIFEST_NAME).write_text(
        json.dumps(expected_manifest(directory, MODULES, depends))
    )
    return depends


def test_a_build_of_these_very_sources_is_used(tmp_path: Path) -> None:
    depends = _built(tmp_path)
    assert choose(tmp_path, {}, MODULES, depends) == Choice(True, "compiled with mypyc (2 modules)")


@pytest.mark.parametrize(
    ("edit", "changed"),
    [
        (lambda d, o: (d / "beta.py").write_text("NAME = 'edited'\n"), "beta.py"),
        # Interpreted, but the compiled ones were built knowing its types.
        (lambda d, o: (d / "gamma.py").write_text("NAME = 1\n"), "gamma.py"),
        (lambda d, o: o.write_text("Amount = float\n"), "outside/types.py"),
        (lambda d, o: (d / "delta.py").write_text(""), "delta.py"),
        (lambda d, o: o.unlink(), "outside/types.py"),
    ],
    ids=["compiled-module", "interpreted-module", "input-outside", "new-module", "input-gone"],
)
def test_any_input_changed_since_the_build_means_pure_python_for_every_module(
    tmp_path: Path, edit, changed: str
) -> None:
    depends = _built(tmp_path)
    edit(tmp_path, depends[0][1])
    choice = choose(tmp_path, {}, MODULES, depends)
    assert not choice.compiled
    assert choice.why == f"pure Python: {changed} changed since it was compiled; run make install"


@pytest.mark.parametrize(
    ("spoil", "why"),
    [
        (lambda d: (d / compiled.MANIFEST_NAME).unlink(), "not compiled (make install compiles"),
        (lambda d: (d / compiled.MANIFEST_NAME).write_text("[]"), "not compiled"),
        (lambda d: (d / f"alpha{SUFFIX}").unlink(), f"alpha{SUFFIX} is missing"),
        (
            lambda d: (d / f"{compiled.SHARED_LIBRARY}{SUFFIX}").unlink(),
            f"{compiled.SHARED_LIBRARY}{SUFFIX} is missing",
        ),
        (
            lambda d: (d / compiled.MANIFEST_NAME).write_text('{"failed": true}'),
            "it could not be compiled (make install says why)",
        ),
        (
            lambda d: (d / compiled.MANIFEST_NAME).write_text(
                json.dumps({**expected_manifest(d, MODULES), "python": "cpython-39"})
            ),
            "compiled for another Python",
        ),
        (
            lambda d: (d / compiled.MANIFEST_NAME).write_text(
                json.dumps(expected_manifest(d, ("alpha",)))
            ),
            "compiled from another list of modules",
        ),
    ],
    ids=[
        "no-manifest",
        "manifest-not-an-object",
        "library-missing",
        "shared-library-missing",
        "build-failed",
        "other-python",
        "other-modules",
    ],
)
def test_a_build_that_does_not_match_is_not_used(tmp_path: Path, spoil, why: str) -> None:
    depends = _built(tmp_path)
    spoil(tmp_path)
    choice = choose(tmp_path, {}, MODULES, depends)
    assert not choice.compiled and why in choice.why


def test_the_switch_forces_pure_python(tmp_path: Path) -> None:
    depends = _built(tmp_path)
    choice = choose(tmp_path, {"BERTH_PURE_ENGINE": "1"}, MODULES, depends)
    assert choice == Choice(False, "pure Python: BERTH_PURE_ENGINE is set")


@pytest.mark.parametrize(
    ("content", "why"),
    [
        ("true\n", "pure Python: BERTH_PURE_ENGINE_FILE is set"),
        ("0\n", "compiled with mypyc"),
        (None, "pure Python: BERTH_PURE_ENGINE_FILE cannot be read"),
    ],
    ids=["true", "false", "unreadable"],
)
def test_the_switch_is_read_from_its_file_like_every_setting(
    tmp_path: Path, content: str | None, why: str
) -> None:
    depends = _built(tmp_path)
    switch = tmp_path / "secrets" / "pure"
    if content is not None:
        switch.parent.mkdir()
        switch.write_text(content)
    choice = choose(tmp_path, {"BERTH_PURE_ENGINE_FILE": str(switch)}, MODULES, depends)
    assert choice.why.startswith(why)


def test_the_variable_wins_over_its_file(tmp_path: Path) -> None:
    depends = _built(tmp_path)
    switch = tmp_path / "pure"
    switch.write_text("1")
    environ = {"BERTH_PURE_ENGINE": "0", "BERTH_PURE_ENGINE_FILE": str(switch)}
    assert choose(tmp_path, environ, MODULES, depends).compiled


def test_sources_first_imports_the_source_beside_an_extension_module(tmp_path: Path) -> None:
    # Python prefers an extension module to a source of the same name: this
    # one is not a library at all, so importing it would fail.
    package = tmp_path / "berth_sources_first"
    package.mkdir()
    (package / "__init__.py").write_text("")
    _built(package)
    sys.path.insert(0, str(tmp_path))
    finder = SourcesFirst("berth_sources_first", package, frozenset())
    try:
        with pytest.raises(ImportError):
            __import__("berth_sources_first.alpha")
        sys.meta_path.insert(0, finder)
        beta = __import__("berth_sources_first.beta", fromlist=["NAME"])
        assert beta.NAME == "beta" and beta.__file__ == str(package / "beta.py")
        finder.allowed = frozenset({"alpha"})  # allowed: the extension module again
        sys.modules.pop("berth_sources_first.alpha", None)
        with pytest.raises(ImportError):
            __import__("berth_sources_first.alpha")
    finally:
        sys.path.remove(str(tmp_path))
        if finder in sys.meta_path:
            sys.meta_path.remove(finder)
        for name in [n for n in sys.modules if n.startswith("berth_sources_first")]:
            del sys.modules[name]


def _compiled_module_classes() -> list[tuple[str, ast.ClassDef]]:
    found = []
    for name in compiled.MODULES:
        tree = ast.parse((ROOT / "queues" / "engine" / f"{name}.py").read_text())
        found += [(name, node) for node in tree.body if isinstance(node, ast.ClassDef)]
    return found


def test_every_class_a_compiled_module_defines_can_be_copied_and_pickled() -> None:
    """Compiled, a class copies and pickles (a rehearsal deep-copies the
    scheduler; workers send replays back pickled) only when marked so; a
    frozen dataclass also needs rebuilding by its fields (frozen_copies)."""
    unmarked, unregistered = [], []
    for module, node in _compiled_module_classes():
        bases = {ast.unparse(base) for base in node.bases}
        if bases & {"IntEnum", "StrEnum", "Enum", "Protocol"}:
            continue  # not native classes
        decorators = [ast.unparse(d) for d in node.decorator_list]
        if "mypyc_attr(serializable=True, allow_interpreted_subclasses=True)" not in decorators:
            unmarked.append(f"{module}.{node.name}")
        source = (ROOT / "queues" / "engine" / f"{module}.py").read_text()
        frozen = any("frozen=True" in d for d in decorators)
        registered = [
            ast.unparse(arg)
            for call in ast.walk(ast.parse(source))
            if isinstance(call, ast.Call) and ast.unparse(call.func) == "rebuilt_by_fields"
            for arg in call.args
        ]
        if frozen and node.name not in registered:
            unregistered.append(f"{module}.{node.name}")
    assert unmarked == [] and unregistered == []


def test_no_compiled_module_leans_on_cached_property() -> None:
    """Compiled, ``functools.cached_property`` caches nothing: it is worked
    out again at every read (a nomination's mode, read in every cycle, cost
    a microsecond each time)."""
    found = [
        f"{module}.{node.name}"
        for module, cls in _compiled_module_classes()
        for node in ast.walk(cls)
        if isinstance(node, ast.FunctionDef)
        and any("cached_property" in ast.unparse(d) for d in node.decorator_list)
    ]
    assert found == []


def test_an_assignment_works_out_its_mode_and_borrowing_once() -> None:
    pod_sets = [PodSetAssignment("main", mode=Mode.NO_FIT, borrow=1), PodSetAssignment("side")]
    assignment = Assignment(pod_sets, {}, set())
    assert (assignment.mode, assignment.borrowing) == (Mode.NO_FIT, 1)
    pod_sets[0].mode, pod_sets[0].borrow = Mode.FIT, 0  # never done: pod sets are final
    assert (assignment.mode, assignment.borrowing) == (Mode.NO_FIT, 1)
    assert assignment == Assignment(pod_sets, {}, set())  # the figures kept are not compared


def test_a_scheduler_in_the_middle_of_a_replay_copies_and_pickles_whole() -> None:
    loaded = load(ROOT / "scenarios" / "demo-day.yaml")
    simulator = Simulator(loaded.policy, workload_stream(loaded))
    simulator.begin()
    simulator.advance(until=6 * 3600.0)
    scheduler = simulator.scheduler
    assert scheduler.workloads and any(len(queue) for queue in scheduler.queues.values())
    for twin in (copy.deepcopy(scheduler), pickle.loads(pickle.dumps(scheduler))):
        assert sorted(twin.workloads) == sorted(scheduler.workloads)
        assert twin.tree.queues.keys() == scheduler.tree.queues.keys()
        for name, node in scheduler.tree.queues.items():
            assert twin.tree.queues[name].usage == node.usage
        for name, queue in scheduler.queues.items():
            assert [k for k in scheduler.workloads if k in twin.queues[name]] == [
                k for k in scheduler.workloads if k in queue
            ]
        assert twin.cycle().evaluated == copy.deepcopy(scheduler).cycle().evaluated


def _digest(pure: bool) -> subprocess.Popen[str]:
    env = {**os.environ}
    env.pop(compiled.PURE_SWITCH, None)
    if pure:
        env[compiled.PURE_SWITCH] = "1"
    return subprocess.Popen(
        [sys.executable, "-m", "tests.engine.replay_digest"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )


def test_the_compiled_engine_answers_as_the_pure_one() -> None:
    """Replays of the shipped scenarios and of a generated month, record by
    record, and start estimates and explanations along the demo day."""
    if not queues.engine.ENGINE.compiled:
        if os.environ.get("BERTH_REQUIRE_COMPILED_ENGINE") == "1":
            pytest.fail(f"CI tests the compiled engine, but: {queues.engine.ENGINE.why}")
        pytest.skip(f"the engine is not compiled here ({queues.engine.ENGINE.why})")
    children = [_digest(pure=True), _digest(pure=False)]
    pure, fast = (json.loads(child.communicate(timeout=900)[0]) for child in children)
    assert all(child.returncode == 0 for child in children)
    assert (pure.pop("engine"), pure.pop("scheduler_module")) == (False, "scheduler.py")
    assert fast.pop("engine") is True
    assert fast.pop("scheduler_module").endswith(SUFFIX)
    assert pure["month"]["preemptions"] and pure["asked"]  # it compares what matters
    for part in pure:
        assert fast[part] == pure[part], part
