"""Running Berth's processes here as the pods would run them: the image's
environment (the Dockerfile's ENV), a data dir holding only what the image
build put there, and, where the machine allows it (root, with ``unshare``), the
data dir and the checkout (the image's /app) mounted read-only in a mount
namespace of the process's own, as ``readOnlyRootFilesystem`` makes them. Tests
also compare the data dir's files before and after, which holds everywhere."""

from __future__ import annotations

import functools
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from tests.deploy.manifests import ROOT

DOCKERFILE = ROOT / "Dockerfile"
SECRET_KEY = "k" * 50


def image_environment() -> dict[str, str]:
    """The Dockerfile's ENV (one ``ENV A=1 B=2`` line)."""
    (line,) = [line for line in DOCKERFILE.read_text().splitlines() if line.startswith("ENV ")]
    return dict(pair.split("=", 1) for pair in line.split()[1:])


def dockerfile_stages() -> dict[str, str]:
    """The Dockerfile's stages by their ``AS`` name; the last, the image, as
    ``image``."""
    stages: dict[str, str] = {}
    parts = re.split(r"^FROM ", DOCKERFILE.read_text(), flags=re.MULTILINE)[1:]
    for index, part in enumerate(parts):
        first = part.split("\n", 1)[0].split()
        name = first[2] if len(first) == 3 and first[1].upper() == "AS" else None
        stages[name or ("image" if index == len(parts) - 1 else str(index))] = part
    return stages


def copied_from_context(stage: str) -> list[str]:
    """What a stage's COPY lines take from the build context (the checkout),
    each to the same path below WORKDIR: ``COPY a a`` and ``COPY a b ./``."""
    sources: list[str] = []
    for line in stage.splitlines():
        words = line.split()
        if not words or words[0] != "COPY" or any(w.startswith("--") for w in words):
            continue
        *given, destination = words[1:]
        if destination == "./":
            sources.extend(s for s in given if "/" not in s)
        elif given == [destination]:
            sources.append(destination)
    return sources


def build_time_collectstatic() -> tuple[dict[str, str], list[str]]:
    """The Dockerfile's collectstatic step: its environment and its command."""
    text = DOCKERFILE.read_text().replace("\\\n", " ")
    match = re.search(r"((?:\w+=\S+\s+)*)(python manage\.py collectstatic[^&]*)", text)
    assert match, "the Dockerfile does not run collectstatic"
    environment = dict(pair.split("=", 1) for pair in match.group(1).split())
    return environment, match.group(2).split()


@functools.cache
def can_mount_read_only() -> bool:
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        return False
    probe = subprocess.run(
        ["unshare", "-m", "--propagation", "private", "true"], capture_output=True, check=False
    )
    return probe.returncode == 0


def read_only(argv: list[str], *folders: Path) -> list[str]:
    """``argv`` with ``folders`` read-only for it (when the machine allows)."""
    if not can_mount_read_only():
        return argv
    mounts = " && ".join(f"mount --bind {f} {f} && mount -o remount,bind,ro {f}" for f in folders)
    return [
        "unshare",
        "-m",
        "--propagation",
        "private",
        "sh",
        "-c",
        f'{mounts} && exec "$@"',
        "sh",
        *argv,
    ]


def writable(path: Path) -> Path:
    """A folder the process may write (an emptyDir in the pod)."""
    path.mkdir(parents=True, exist_ok=True)
    return path


def image_data_dir(root: Path) -> Path:
    """The image's data dir: static files collected by the build's own command,
    and nothing else."""
    data = root / "data"
    environment, command = build_time_collectstatic()
    done = subprocess.run(
        [sys.executable, *command[1:]],
        cwd=ROOT,
        env={**base_environment(data), **environment},
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return data


def base_environment(data: Path) -> dict[str, str]:
    """What a container starts with besides its own env: the image's ENV (the
    data dir moved to ``data``), its user's HOME (the data dir) and a PATH that
    finds this checkout's python, gunicorn and celery."""
    return {
        **image_environment(),
        "BERTH_DATA_DIR": str(data),
        "HOME": str(data),
        "PATH": f"{Path(sys.executable).parent}:/usr/local/bin:/usr/bin:/bin",
        "LANG": "C.UTF-8",
    }


def files(folder: Path) -> dict[str, tuple[int, int]]:
    """Every file below ``folder`` with its modification time and size."""
    return {
        str(p.relative_to(folder)): (p.stat().st_mtime_ns, p.stat().st_size)
        for p in folder.rglob("*")
    }


def start(
    argv: list[str], env: Mapping[str, str], log: Path, data: Path
) -> subprocess.Popen[bytes]:
    """Start ``argv`` with the data dir and the checkout read-only for it."""
    with log.open("ab") as out:
        return subprocess.Popen(
            read_only(argv, data, ROOT),
            cwd=ROOT,
            env=dict(env),
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def run(
    argv: list[str], env: Mapping[str, str], cwd: Path = ROOT, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        argv,
        cwd=cwd,
        env=dict(env),
        capture_output=True,
        text=True,
        check=False,
        timeout=timeout,
    )


def wait_for(
    condition: Callable[[], Any],
    what: str,
    log: Path,
    process: subprocess.Popen[bytes],
    seconds: float = 90,
) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        if process.poll() is not None or time.monotonic() > deadline:
            pytest.fail(f"{what} did not happen; the process's log:\n{log.read_text()}")
        time.sleep(0.1)
