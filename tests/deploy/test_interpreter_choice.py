"""The interpreter `make install` builds .venv on (scripts/pick_python.py):
its rule, on made-up candidates, and the script run on this machine's."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from scripts.pick_python import Interpreter, choose, probe

ROOT = Path(__file__).resolve().parents[2]


def interpreter(
    name: str,
    version: tuple[int, int, int] = (3, 11, 7),
    venv: bool = True,
    headers: bool = True,
    shared: bool | None = True,
) -> Interpreter:
    path = f"/opt/{name}/bin/python3"
    return Interpreter(path, path, version, venv, headers, shared)


def test_one_with_its_core_linked_in_is_preferred_to_one_loading_a_shared_libpython() -> None:
    on_path = interpreter("pyenv", shared=True)
    system = interpreter("debian", version=(3, 11, 2), shared=False)
    assert choose([on_path, system]) is system


def test_one_the_engine_compiles_on_is_preferred_to_one_linked_in_without_headers() -> None:
    with_headers = interpreter("pyenv", shared=True)
    without_headers = interpreter("debian", headers=False, shared=False)
    assert choose([without_headers, with_headers]) is with_headers


def test_the_paths_interpreter_is_kept_when_nothing_tells_them_apart() -> None:
    first = interpreter("first", shared=None)
    second = interpreter("second", shared=True)
    assert choose([first, second]) is first
    assert choose([second, first]) is second


def test_an_interpreter_older_than_3_11_or_without_venv_is_never_chosen() -> None:
    old = interpreter("old", version=(3, 10, 12), shared=False)
    no_venv = interpreter("bare", venv=False, shared=False)
    shared = interpreter("shared", shared=True)
    assert choose([old, no_venv, shared]) is shared
    assert choose([old, no_venv]) is None


def test_a_probe_sees_the_interpreter_as_it_sees_itself() -> None:
    found = probe(sys.executable)
    assert found is not None
    assert found.command == sys.executable
    assert found.executable == os.path.realpath(sys.executable)
    assert found.version == tuple(sys.version_info[:3])
    with Path("/proc/self/maps").open() as maps:
        assert found.shared_libpython == any("libpython" in line for line in maps)


def test_the_script_prints_an_interpreter_make_can_build_the_venv_on() -> None:
    script = str(ROOT / "scripts" / "pick_python.py")
    chosen = subprocess.run(
        [sys.executable, script], capture_output=True, text=True, check=True
    ).stdout.strip()
    found = probe(chosen)
    assert found is not None and found.version >= (3, 11, 0) and found.venv
    why = subprocess.run(
        [sys.executable, script, "--why"], capture_output=True, text=True, check=True
    ).stdout
    marked = [line for line in why.splitlines() if line.startswith("* ")]
    assert marked == [f"* {found.describe()}"]
