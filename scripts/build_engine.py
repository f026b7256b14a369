"""Compile the admission engine's replay path with mypyc, beside its sources.

`make install` runs this. The extension modules it builds (``*.so`` in
``queues/engine/``, ignored by git) are used only while every input of the
build is exactly what was built from (``queues/engine/native.json`` holds
their hashes; see ``queues/engine/compiled.py``), so after an edit the engine
runs from its sources until the next build. When the build fails, or the
machine has no C compiler, the engine runs as pure Python, which gives the same
answers: this script says so and exits 0.

    python scripts/build_engine.py            # build (a minute or two)
    python scripts/build_engine.py --require  # build, and exit 1 unless it is used
    python scripts/build_engine.py --clean    # remove the build: pure Python

``--require`` is the container image's: there a build that cannot be used
stops the image build rather than ship the pure engine unsaid.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ENGINE = ROOT / "queues" / "engine"
BUILD_TEMP = ROOT / ".build" / "mypyc"
sys.path.insert(0, str(ROOT))

# What is compiled (MODULES), and why the rest is not, is said there.
from queues.engine import compiled  # noqa: E402

# Where mypy may not follow: plotly has no stubs, and the rest of the project
# is type-checked with the Django plugin, which mypyc does not need here.
MYPY_CONFIG = """\
[mypy]
python_version = 3.11
strict_optional = True
check_untyped_defs = True
follow_imports = silent
ignore_missing_imports = True
"""


def clean() -> None:
    for built in ENGINE.glob(f"*{compiled.SUFFIX}"):
        built.unlink()
    compiled.MANIFEST.unlink(missing_ok=True)


def build() -> int:
    if compiled.choose(environ={}).compiled:
        compiled.MANIFEST.touch()  # what make saw change is no input of the build
        print("==> the compiled engine is up to date")
        return 0
    clean()
    modules = compiled.MODULES
    # What is built from, read before: a source saved during the build must not
    # be recorded as built.
    manifest = compiled.expected_manifest()
    print(
        f"==> compiling {len(modules)} engine modules with mypyc "
        "(a minute or two; the engine runs as pure Python until it is done)",
        flush=True,
    )
    started = time.monotonic()
    BUILD_TEMP.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", suffix=".ini", delete=False) as config:
        config.write(MYPY_CONFIG)
    setup = (
        "import sys\n"
        "from setuptools import setup\n"
        "from mypyc.build import mypycify\n"
        "paths = sys.argv[1:]\n"
        "sys.argv = sys.argv[:1]\n"
        "setup(name='berth-engine', ext_modules=mypycify(paths, group_name='queues.engine.native',"
        f" opt_level='3', target_dir={str(BUILD_TEMP / 'c')!r}), script_args=['build_ext',"
        f" '--inplace', '--build-temp', {str(BUILD_TEMP / 'temp')!r}, '--build-lib',"
        f" {str(BUILD_TEMP / 'lib')!r}])\n"
    )
    paths = [f"queues/engine/{name}.py" for name in modules]
    env = dict(os.environ)
    env.pop("DJANGO_SETTINGS_MODULE", None)
    done = subprocess.run(
        [sys.executable, "-c", setup, "--config-file", config.name, *paths],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    Path(config.name).unlink()
    if done.returncode != 0:
        clean()
        # Said, so that make does not try again at every command until a source changes.
        compiled.MANIFEST.write_text(json.dumps({"failed": True}))
        tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-15:])
        print(
            f"warning: the engine could not be compiled, so it runs as pure Python "
            f"(same answers, slower replays):\n{tail}",
            file=sys.stderr,
        )
        return 0
    if compiled.expected_manifest() != manifest:
        print(
            "warning: engine sources changed during the build, so it is not used: "
            "run make install again",
            file=sys.stderr,
        )
        return 0
    compiled.MANIFEST.write_text(json.dumps(manifest, indent=1, sort_keys=True))
    seconds = time.monotonic() - started
    print(f"==> engine compiled in {seconds:.0f} s ({compiled.MANIFEST.relative_to(ROOT)})")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clean", action="store_true", help="remove the build")
    parser.add_argument(
        "--require", action="store_true", help="exit 1 unless the build is what the engine runs"
    )
    args = parser.parse_args()
    if args.clean:
        clean()
        print("==> compiled engine removed: it runs as pure Python")
        return 0
    built = build()
    if args.require:
        # As a process would choose, but whatever BERTH_PURE_ENGINE says here.
        choice = compiled.choose(environ={})
        if not choice.compiled:
            print(f"error: the compiled engine would not be used ({choice.why})", file=sys.stderr)
            return 1
    return built


if __name__ == "__main__":
    sys.exit(main())
