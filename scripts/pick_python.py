"""Print the Python interpreter `make install` builds `.venv` on.

Among ``python3`` on the PATH and the system's own (``/usr/bin/python3``,
``/usr/local/bin/python3``), it keeps those that are 3.11 or newer and can
make a venv, and prefers, in turn:

1. one with its C headers (``Python.h``), so that the engine compiles with
   mypyc (``scripts/build_engine.py``): the pure engine replays about three
   times slower;
2. one whose core is linked into its executable rather than loaded from a
   shared ``libpython``: calls inside a shared ``libpython`` go through the
   dynamic linker's tables, and such builds (pyenv's default) are rarely built
   with profile-guided optimisation. On the project's machine Debian's
   ``/usr/bin/python3.11`` replays in about 20% less time than pyenv's 3.11
   with the same engine (``docs/replay-scale-history.md``, 2026-12-07,
   afternoon);
3. the PATH's, as ``python3`` would be.

    python3 scripts/pick_python.py          # the path, for the Makefile
    python3 scripts/pick_python.py --why    # every candidate and the choice

``make install PYTHON=/path/to/python3`` skips the choice. An existing
``.venv`` is kept as it is: ``make clean`` first to build it again.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

SYSTEM_INTERPRETERS = ("/usr/bin/python3", "/usr/local/bin/python3")

# Run by each candidate: what it is, as it sees itself.
PROBE = r"""
import importlib.util, json, os, sys, sysconfig
try:
    with open("/proc/self/maps") as maps:
        shared = any("libpython" in line for line in maps)
except OSError:
    shared = None
include = sysconfig.get_paths().get("include") or ""
print(json.dumps({
    "executable": os.path.realpath(sys.executable),
    "version": list(sys.version_info[:3]),
    "venv": all(importlib.util.find_spec(m) is not None for m in ("venv", "ensurepip")),
    "headers": os.path.exists(os.path.join(include, "Python.h")),
    "shared_libpython": shared,
}))
"""


@dataclass(frozen=True)
class Interpreter:
    # What the venv is built with (a pyenv shim or Homebrew's link stays one,
    # so that it follows upgrades), and the file it runs, which tells two
    # commands for one interpreter apart.
    command: str
    executable: str
    version: tuple[int, int, int]
    venv: bool
    headers: bool
    # None where the platform cannot tell (no /proc): counted as shared.
    shared_libpython: bool | None

    def describe(self) -> str:
        version = ".".join(str(part) for part in self.version)
        facts = [
            f"Python {version}",
            "can make a venv" if self.venv else "cannot make a venv (no venv/ensurepip)",
            "has its C headers" if self.headers else "has no C headers (no compiled engine)",
            {
                True: "loads a shared libpython",
                False: "has its core linked in",
                None: "linking unknown",
            }[self.shared_libpython],
        ]
        runs = "" if self.command == self.executable else f" ({self.executable})"
        return f"{self.command}{runs}: " + ", ".join(facts)


def eligible(interpreter: Interpreter) -> bool:
    return interpreter.version >= (3, 11, 0) and interpreter.venv


def choose(candidates: list[Interpreter]) -> Interpreter | None:
    """The candidate to build on, or None if none is eligible. ``candidates``
    are in the PATH's order of preference; ``min`` keeps the first on ties."""
    usable = [candidate for candidate in candidates if eligible(candidate)]
    return min(
        usable,
        key=lambda candidate: (not candidate.headers, candidate.shared_libpython is not False),
        default=None,
    )


def probe(command: str) -> Interpreter | None:
    try:
        done = subprocess.run(
            # -I: no PYTHONPATH, PYTHONHOME or user site-packages in what it says of itself.
            [command, "-I", "-c", PROBE],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        )
        facts = json.loads(done.stdout)
        major, minor, micro = facts["version"]
    except (OSError, subprocess.SubprocessError, ValueError, KeyError):
        return None
    return Interpreter(
        command=command,
        executable=facts["executable"],
        version=(int(major), int(minor), int(micro)),
        venv=bool(facts["venv"]),
        headers=bool(facts["headers"]),
        shared_libpython=facts["shared_libpython"],
    )


def candidates() -> list[Interpreter]:
    commands = [shutil.which("python3") or sys.executable, *SYSTEM_INTERPRETERS]
    found: list[Interpreter] = []
    seen: set[str] = set()
    for command in commands:
        if not Path(command).exists():
            continue
        interpreter = probe(command)
        if interpreter is None or interpreter.executable in seen:
            continue
        seen.add(interpreter.executable)
        found.append(interpreter)
    return found


def main(argv: list[str]) -> int:
    why = "--why" in argv
    found = candidates()
    chosen = choose(found)
    if why:
        for interpreter in found:
            mark = "*" if interpreter is chosen else " "
            print(f"{mark} {interpreter.describe()}")
    if chosen is None:
        print(
            "no Python 3.11+ that can make a venv was found: install one (Debian: "
            "apt-get install python3 python3-venv python3-dev) or pass PYTHON=/path/to/python3",
            file=sys.stderr,
        )
        return 1
    if not why:
        print(chosen.command)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
