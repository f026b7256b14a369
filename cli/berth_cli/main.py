"""Argument parsing and the entry point."""

import argparse
import importlib.metadata
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, NoReturn

from berth_cli.approvals import add_approvals_parser
from berth_cli.base import (
    API_PREFIX,
    EXIT_BROKEN_PIPE,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    OUTPUTS,
    CliError,
    _key_value,
    _kind,
    parse_duration,
)
from berth_cli.client import ApiError, api_failure
from berth_cli.commands import (
    cmd_cancel,
    cmd_list,
    cmd_login,
    cmd_queues,
    cmd_status,
    cmd_submit,
    cmd_why,
)
from berth_cli.gang_fit import add_gang_fit_parser
from berth_cli.grants import add_grants_parser
from berth_cli.plan import add_plan_parser
from berth_cli.usage import add_usage_parser

if TYPE_CHECKING:
    from _typeshed import SupportsWrite

# --- argument parsing --------------------------------------------------------------


class Parser(argparse.ArgumentParser):
    """argparse that reports a usage error on one line, as every other error."""

    def error(self, message: str) -> NoReturn:
        raise CliError(f"{message} (see `{self.prog} --help`)", code=EXIT_USAGE)

    def _print_message(self, message: str, file: "SupportsWrite[str] | None" = None) -> None:
        # argparse swallows a failed write; let a closed pipe reach main(), so
        # `berth --help | head` exits like every other command.
        if message:
            (file or sys.stderr).write(message)


def _version() -> str:
    # Its own distribution on a laptop; part of the server's on the server.
    for distribution in ("berth-cli", "berth"):
        try:
            return importlib.metadata.version(distribution)
        except importlib.metadata.PackageNotFoundError:
            continue
    return "unknown"


def build_parser() -> Parser:
    common = Parser(add_help=False)
    common.add_argument(
        "-o",
        "--output",
        choices=OUTPUTS,
        default=argparse.SUPPRESS,
        help="table (default), yaml or json: the API's whole answer",
    )
    parser = Parser(
        prog="berth",
        description="Submit and follow training jobs on Berth (talks to its REST API).",
        epilog="BERTH_URL and BERTH_TOKEN override the saved login; BERTH_CONFIG moves it.",
    )
    parser.add_argument("-o", "--output", choices=OUTPUTS, default="table", help=argparse.SUPPRESS)
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    commands = parser.add_subparsers(dest="command_name", metavar="COMMAND", parser_class=Parser)

    login = commands.add_parser("login", parents=[common], help="check a token and save it")
    login.add_argument("--url", help="Berth's address, e.g. https://berth.example.com")
    login.add_argument("--token", help="a personal token (else BERTH_TOKEN, else a prompt)")
    login.set_defaults(func=cmd_login)

    submit = commands.add_parser(
        "submit",
        parents=[common],
        help="submit a job (or --dry-run it)",
        usage="berth submit --name N --image I --queue Q [options] -- COMMAND [ARG ...]",
    )
    submit.add_argument("--name", required=True, help="the job's name (DNS label)")
    submit.add_argument("--image", required=True, help="container image")
    submit.add_argument("--queue", required=True, help="a LocalQueue, or a queue class")
    submit.add_argument("--nodes", type=int, help="nodes (pods) in the gang; default 1")
    submit.add_argument("--gpus-per-node", type=int, help="GPUs per node; default 0")
    submit.add_argument("--cpu-per-node", help="CPU per node, e.g. 32 or 500m")
    submit.add_argument("--memory-per-node", help="memory per node, e.g. 256Gi")
    submit.add_argument("--priority", help="WorkloadPriorityClass")
    submit.add_argument("--checkpoint", help="checkpoint URI, e.g. s3://bucket/run")
    submit.add_argument("--kind", type=_kind, help="Job (default), JobSet, PyTorchJob, TrainJob")
    submit.add_argument("--team", help="team, when you are in several")
    submit.add_argument("--namespace", help="namespace, when your team has several")
    submit.add_argument("--max-runtime", type=parse_duration, help="limit: 90, 15m, 2h, 1d")
    submit.add_argument(
        "--expected-runtime", type=parse_duration, help="how long it should run (estimates)"
    )
    submit.add_argument("--retries", type=int, help="restarts allowed before it fails")
    submit.add_argument(
        "--min-nodes", type=int, help="kind Job: may start with as few nodes (partial admission)"
    )
    topology = submit.add_mutually_exclusive_group()
    topology.add_argument(
        "--same-required",
        dest="topology_required",
        metavar="LEVEL",
        help="all nodes in one domain of this topology level (a node label, e.g. "
        "topology.berth.dev/rack), or it waits",
    )
    topology.add_argument(
        "--same-preferred",
        dest="topology_preferred",
        metavar="LEVEL",
        help="in one domain of this topology level if it can, else wider",
    )
    spot = submit.add_mutually_exclusive_group()
    spot.add_argument(
        "--spot",
        dest="spot_allowed",
        action="store_true",
        default=None,
        help="may run on spot capacity (default: the queue class decides)",
    )
    spot.add_argument(
        "--no-spot", dest="spot_allowed", action="store_false", help="on-demand capacity only"
    )
    submit.add_argument(
        "--env", type=_key_value, action="extend", nargs="+", metavar="K=V", help="environment"
    )
    submit.add_argument(
        "--label", type=_key_value, action="extend", nargs="+", metavar="K=V", help="labels"
    )
    submit.add_argument("--justification", help="why (urgent-release approvals)")
    submit.add_argument("--runtime", help="ClusterTrainingRuntime (TrainJob)")
    submit.add_argument("--dry-run", action="store_true", help="check and forecast only")
    submit.add_argument(
        "--show-manifest", action="store_true", help="print the rendered manifest as YAML"
    )
    submit.set_defaults(func=cmd_submit)

    listing = commands.add_parser("list", parents=[common], help="your teams' jobs")
    listing.add_argument("--team")
    listing.add_argument("--state", action="extend", nargs="+", help="e.g. queued running")
    listing.add_argument("--queue", help="ClusterQueue")
    listing.add_argument("--all", action="store_true", help="every page, not only the first")
    listing.set_defaults(func=cmd_list)

    for name, func, text in (
        ("status", cmd_status, "a job's state, figures and timeline"),
        ("why", cmd_why, "why a job is waiting, and what would help"),
        ("cancel", cmd_cancel, "cancel a job (its record stays)"),
    ):
        command = commands.add_parser(name, parents=[common], help=text)
        command.add_argument("name", metavar="NAME")
        command.add_argument("--team", help="when the name is used in several teams")
        command.set_defaults(func=func)

    queues = commands.add_parser("queues", parents=[common], help="where you can submit")
    queues.add_argument("--team", help="one team's LocalQueues")
    queues.add_argument("--all", action="store_true", help="every LocalQueue")
    queues.set_defaults(func=cmd_queues)

    add_approvals_parser(commands, common)
    add_usage_parser(commands, common)
    add_plan_parser(commands, common)
    add_grants_parser(commands, common)
    add_gang_fit_parser(commands, common)
    return parser


def run(argv: list[str]) -> int:
    # Everything after the first `--` is the job's command, untouched by argparse.
    command: list[str] = []
    if "--" in argv:
        split = argv.index("--")
        argv, command = argv[:split], argv[split + 1 :]
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return EXIT_OK
    if command and args.func is not cmd_submit:
        raise CliError(f"`berth {args.command_name}` takes no command after `--`", code=EXIT_USAGE)
    args.command = command
    try:
        return int(args.func(args))
    except ApiError as exc:
        raise api_failure(exc, exc.url.split(API_PREFIX)[0]) from None


def main(argv: Sequence[str] | None = None) -> int:
    """The ``berth`` console script. Returns the exit code."""
    try:
        code = _main(argv)
        # Flush here, not at exit: a reader that went away (`berth list | head`)
        # must show up as BrokenPipeError inside this guard.
        sys.stdout.flush()
    except BrokenPipeError:
        _drop_stdout()
        return EXIT_BROKEN_PIPE
    return code


def _drop_stdout() -> None:
    """Point stdout at /dev/null, so the interpreter's own flush at exit does
    not fail on the closed pipe a second time ("Exception ignored ...")."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):  # not a real file (a test's capture): nothing to flush
        pass


def _main(argv: Sequence[str] | None) -> int:
    try:
        return run(list(sys.argv[1:] if argv is None else argv))
    except CliError as exc:
        for line in exc.lines:
            print(f"berth: {line}", file=sys.stderr)
        return exc.code
    except SystemExit as exc:  # --help, --version
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except KeyboardInterrupt:
        print("berth: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
