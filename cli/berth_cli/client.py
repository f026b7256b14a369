"""HTTP to Berth's API with a token, and its failures in one line each."""

import json
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterable
from http.client import HTTPException
from typing import Any

from berth_cli.base import API_PREFIX, EXIT_USAGE, TIMEOUT_SECONDS, CliError
from berth_cli.config import normalise_url

# --- HTTP --------------------------------------------------------------------------


class ApiError(Exception):
    def __init__(self, status: int, body: Any, url: str) -> None:
        super().__init__(f"HTTP {status} from {url}")
        self.status = status
        self.body = body
        self.url = url

    @property
    def detail(self) -> str:
        if isinstance(self.body, dict) and self.body.get("detail"):
            return str(self.body["detail"])
        # Not Berth's JSON (a proxy's or another server's page): say where it came from.
        return f"HTTP {self.status} from {self.url}"


class Client:
    """Berth's REST API over ``urllib``: JSON in and out, the token as a Bearer."""

    def __init__(self, url: str, token: str) -> None:
        self.url = normalise_url(url)
        self.token = token

    def endpoint(self, path: str, query: Iterable[tuple[str, str]] = ()) -> str:
        target = self.url + API_PREFIX + path.lstrip("/")
        pairs = list(query)
        return f"{target}?{urllib.parse.urlencode(pairs)}" if pairs else target

    def call(
        self,
        method: str,
        path: str,
        *,
        query: Iterable[tuple[str, str]] = (),
        body: Any = None,
    ) -> Any:
        url = self.endpoint(path, query)
        data = None if body is None else json.dumps(body).encode("utf-8")
        request = urllib.request.Request(url, data=data, method=method)
        request.add_header("Accept", "application/json")
        request.add_header("User-Agent", "berth-cli")
        if self.token:
            request.add_header("Authorization", f"Bearer {self.token}")
        if data is not None:
            request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=TIMEOUT_SECONDS) as response:
                raw = response.read()
        except urllib.error.HTTPError as exc:
            raise ApiError(exc.code, _decode(exc.read()), url) from None
        except (urllib.error.URLError, OSError, HTTPException) as exc:
            reason = getattr(exc, "reason", None) or exc
            raise CliError(
                f"cannot reach Berth at {self.url} ({reason}); check the address, "
                f"or run `berth login --url URL`"
            ) from None
        answer = _decode(raw)
        if raw and isinstance(answer, str):
            raise CliError(
                f"{self.url} did not answer like Berth (no JSON from {API_PREFIX}{path}); "
                "check the address, or run `berth login --url URL`"
            )
        return answer

    def get(self, path: str, query: Iterable[tuple[str, str]] = ()) -> Any:
        return self.call("GET", path, query=query)

    def get_text(self, path: str, query: Iterable[tuple[str, str]] = ()) -> str:
        """A non-JSON answer (a CSV file) as text; errors are JSON, as from ``call``."""
        url = self.endpoint(path, query)
        request = urllib.request.Request(url, method="GET")
        request.add_header("User-Agent", "berth-cli")
        if self.token:
            request.add_header("Authorization", f"Bearer {self.token}")
        try:
            with urllib.request.urlopen(request, timeout=TIMEOUT_SECONDS) as response:
                return str(response.read().decode("utf-8", errors="replace"))
        except urllib.error.HTTPError as exc:
            raise ApiError(exc.code, _decode(exc.read()), url) from None
        except (urllib.error.URLError, OSError, HTTPException) as exc:
            reason = getattr(exc, "reason", None) or exc
            raise CliError(
                f"cannot reach Berth at {self.url} ({reason}); check the address, "
                f"or run `berth login --url URL`"
            ) from None

    def get_all(self, path: str, query: Iterable[tuple[str, str]] = ()) -> list[dict[str, Any]]:
        """Every page of a paginated list ({count, next, previous, results})."""
        pairs = list(query)
        results: list[dict[str, Any]] = []
        while True:
            page = self.get(path, pairs)
            if not isinstance(page, dict):
                return list(page or [])
            results.extend(page.get("results") or [])
            following = page.get("next")
            if not following:
                return results
            # Reuse our own address with the next page's query, so a proxy that
            # rewrites the host or scheme cannot send us elsewhere.
            pairs = urllib.parse.parse_qsl(urllib.parse.urlsplit(following).query)


def _decode(raw: bytes) -> Any:
    if not raw:
        return None
    text = raw.decode("utf-8", errors="replace")
    try:
        return json.loads(text)
    except ValueError:
        return text


def api_failure(exc: ApiError, client_url: str) -> CliError:
    """What to report for an HTTP error, and the exit code: 2 for refused input."""
    if exc.status == 400:
        errors = exc.body.get("errors") if isinstance(exc.body, dict) else None
        if errors:
            lines = []
            for error in errors:
                field = error.get("field") or "request"
                message = error.get("message") or "invalid"
                rule = error.get("rule")
                lines.append(f"{field}: {message}" + (f" ({rule})" if rule else ""))
            return CliError(*lines, code=EXIT_USAGE)
        return CliError(exc.detail, code=EXIT_USAGE)
    if exc.status == 401:
        return CliError(
            f"Berth at {client_url} refused the token (invalid, revoked or expired); "
            "run `berth login` with a new one"
        )
    if exc.status == 403:
        return CliError(f"not allowed: {exc.detail}")
    if exc.status in (409, 412):
        return CliError(exc.detail)
    if exc.status == 404:
        return CliError(f"not found: {exc.detail}")
    if exc.status >= 500:
        return CliError(f"Berth failed to answer (HTTP {exc.status}): {exc.detail}")
    return CliError(f"HTTP {exc.status}: {exc.detail}")
