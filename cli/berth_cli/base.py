"""The CLI's constants, its error, and argument values (durations, key=value)."""

import argparse

# Pure (no Django): the one reading of durations, shared with the API.
from berth_cli import durations

API_PREFIX = "/api/v1/"
TIMEOUT_SECONDS = 30.0
GPU = "nvidia.com/gpu"
KINDS = ("Job", "JobSet", "PyTorchJob", "TrainJob")
OUTPUTS = ("table", "yaml", "json")
# States in which a job still waits for (re)admission; `berth why` has something to say.
WAITING = {"submitted", "queued", "quota-reserved", "preempted"}
ENDED = {"succeeded", "failed", "cancelled", "rejected"}

EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130
# The reader of stdout went away (`berth list | head`): 128 + SIGPIPE, what the
# shell reports for cat, grep or git cut short the same way.
EXIT_BROKEN_PIPE = 141


class CliError(Exception):
    """A failure to report: one ``berth: ...`` line per entry, then exit ``code``."""

    def __init__(self, *lines: str, code: int = EXIT_ERROR) -> None:
        super().__init__(lines[0] if lines else "")
        self.lines = [line for line in lines if line] or ["failed"]
        self.code = code


# --- durations and key=value pairs ------------------------------------------------


def parse_duration(text: str) -> int:
    """Seconds in ``90``, ``90s``, ``15m``, ``2h``, ``1d`` (or ``1h30m``): the
    API's own reading (``berth_cli.durations``), as an argparse type."""
    try:
        return durations.parse_duration(text)
    except durations.DurationError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _key_value(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"{text!r} is not KEY=VALUE")
    return key.strip(), value


def _kind(text: str) -> str:
    for kind in KINDS:
        if text.lower() == kind.lower():
            return kind
    raise argparse.ArgumentTypeError(f"{text!r} is not a job kind: use one of {', '.join(KINDS)}")
