"""Make sure the Chromium the browser tests drive is on this machine.

``make test`` runs this before the suite. The browser tests use Debian's
``chromium`` (Playwright cannot download its own browsers here):

- ``BERTH_CHROMIUM`` set: that binary must exist and run, or this stops.
- Otherwise ``/usr/bin/chromium``; when it is missing and we are root with
  ``apt-get``, it is installed (``apt-get update``, then
  ``apt-get install -y --no-install-recommends chromium``).
- Anything else stops with one line saying what to install. It never skips.

Quick and silent but for one line when Chromium is already there.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

DEFAULT = Path("/usr/bin/chromium")
APT_ENV = {"DEBIAN_FRONTEND": "noninteractive", "NEEDRESTART_MODE": "a"}
# Wait for another apt/dpkg (an unattended upgrade, a second `make test`) instead of failing.
APT_LOCK_WAIT = ["-o", "DPkg::Lock::Timeout=300"]


class BrowserError(Exception):
    pass


def say(message: str) -> None:
    print(f"==> {message}", flush=True)


def version(binary: Path) -> str:
    """What ``chromium --version`` prints; raises BrowserError if it does not run."""
    try:
        result = subprocess.run(
            [str(binary), "--version"], capture_output=True, text=True, timeout=60, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise BrowserError(f"{binary} does not run: {exc}") from exc
    if result.returncode != 0:
        detail = (result.stderr or result.stdout).strip().splitlines()[-1:] or ["no output"]
        raise BrowserError(f"{binary} --version failed ({result.returncode}): {detail[0]}")
    return result.stdout.strip()


def apt(*args: str) -> None:
    argv = ["apt-get", *APT_LOCK_WAIT, *args]
    result = subprocess.run(
        argv,
        capture_output=True,
        text=True,
        env={**os.environ, **APT_ENV},
        stdin=subprocess.DEVNULL,
        check=False,
    )
    if result.returncode != 0:
        tail = "\n".join((result.stdout + result.stderr).strip().splitlines()[-15:])
        raise BrowserError(f"`{' '.join(argv)}` failed ({result.returncode}):\n{tail}")


def install_chromium() -> None:
    started = time.monotonic()
    say("installing Debian's chromium for the browser tests (about 20 s)")
    say("apt-get update")
    apt("update", "-q")
    say("apt-get install -y --no-install-recommends chromium")
    apt("install", "-y", "-q", "--no-install-recommends", "chromium")
    say(f"chromium installed in {time.monotonic() - started:.0f} s")


def can_install() -> bool:
    return os.geteuid() == 0 and shutil.which("apt-get") is not None


def ensure() -> Path:
    override = os.environ.get("BERTH_CHROMIUM", "").strip()
    if override:
        binary = Path(override)
        if not (binary.is_file() and os.access(binary, os.X_OK)):
            raise BrowserError(
                f"BERTH_CHROMIUM={override} is not an executable file: point it at a Chromium "
                "binary, or unset it to use Debian's /usr/bin/chromium"
            )
    else:
        binary = DEFAULT
        if not binary.exists():
            if not can_install():
                raise BrowserError(
                    f"the browser tests need Chromium at {DEFAULT}: install Debian's package "
                    "as root (`apt-get update && apt-get install -y chromium`), or set "
                    "BERTH_CHROMIUM to a Chromium binary"
                )
            install_chromium()
            if not binary.exists():
                raise BrowserError(f"apt-get installed chromium, but {binary} is still missing")
    say(f"browser tests use {binary} ({version(binary)})")
    return binary


def main() -> int:
    try:
        ensure()
    except BrowserError as exc:
        print(f"ensure-browser: error: {exc}", file=sys.stderr, flush=True)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
