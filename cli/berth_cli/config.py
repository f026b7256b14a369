"""Where ``berth login`` keeps the API address and token."""

import json
import os
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

from berth_cli.base import API_PREFIX, EXIT_USAGE, CliError

# --- configuration -----------------------------------------------------------------


def config_path() -> Path:
    explicit = os.environ.get("BERTH_CONFIG", "").strip()
    if explicit:
        return Path(explicit).expanduser()
    return Path("~/.config/berth/config.json").expanduser()


def load_config() -> dict[str, str]:
    path = config_path()
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise CliError(f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        data = json.loads(text)
    except ValueError:
        raise CliError(f"{path} is not valid JSON; run `berth login` to write it again") from None
    if not isinstance(data, dict):
        raise CliError(f"{path} is not a Berth config; run `berth login` to write it again")
    return {k: v for k, v in data.items() if k in ("url", "token") and isinstance(v, str)}


def save_config(url: str, token: str) -> Path:
    """Write the config readable by its owner only, atomically (no half-written file)."""
    path = config_path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=".config-", suffix=".json")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                json.dump({"url": url, "token": token}, handle, indent=2)
                handle.write("\n")
            Path(temporary).chmod(0o600)
            Path(temporary).replace(path)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise
    except OSError as exc:
        raise CliError(f"cannot write {path}: {exc.strerror or exc}") from None
    return path


def normalise_url(url: str) -> str:
    """``https://berth.example.com/`` or ``.../api/v1`` both mean the server's root."""
    url = url.strip().rstrip("/")
    if url.endswith(API_PREFIX.rstrip("/")):
        url = url[: -len(API_PREFIX.rstrip("/"))].rstrip("/")
    parsed = urllib.parse.urlsplit(url)
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        raise CliError(
            f"{url!r} is not a Berth address: give http(s)://host[:port]", code=EXIT_USAGE
        )
    return url
