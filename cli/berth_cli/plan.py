"""``berth plan capacity``: how many GPUs of each flavor so that a queue
class's waits stay under a target, by replaying recorded load (or a
scenario) at other capacities, through ``/api/v1/plans/capacity/``; ``berth
plan show ID`` follows a plan. Platform admins only."""

import argparse
import sys
import time
from typing import Any

from berth_cli.base import EXIT_ERROR, EXIT_OK, EXIT_USAGE, CliError
from berth_cli.client import Client
from berth_cli.commands import connect
from berth_cli.output import emit, human_seconds, table

PATH = "plans/capacity/"
POLL_SECONDS = 2.0


def target(text: str) -> dict[str, Any]:
    """``QUEUE:WAIT`` or ``QUEUE:pNN:WAIT`` (``training-large:p90:1h``)."""
    parts = text.split(":")
    if len(parts) == 2:
        queue, wait = parts
        percentile = "90"
    elif len(parts) == 3:
        queue, percentile, wait = parts
    else:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not QUEUE:WAIT or QUEUE:pNN:WAIT (e.g. training-large:p90:1h)"
        )
    percentile = percentile.lower().removeprefix("p")
    try:
        number = float(percentile)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r}: {percentile!r} is not a percentile (e.g. p90)"
        ) from None
    if not queue or not wait:
        raise argparse.ArgumentTypeError(f"{text!r}: give a queue and a wait (e.g. 1h)")
    return {"queue": queue, "percentile": number, "max_wait": wait}


def plan_id(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a plan id (a number, e.g. 12)")
    return int(text)


def add_plan_parser(commands: Any, common: argparse.ArgumentParser) -> None:
    """``berth plan COMMAND``, under the top-level ``commands``."""
    plan = commands.add_parser(
        "plan",
        parents=[common],
        help="capacity planning: how many GPUs for a wait target (platform admins)",
        description="Replays recorded load (or a scenario) under the current policy with a "
        "flavor's capacity stepped in whole nodes, and finds the fewest GPUs at which each "
        "target holds in every seed.",
    )
    sub = plan.add_subparsers(dest="plan_command", metavar="COMMAND", parser_class=type(plan))
    sub.required = True
    capacity = sub.add_parser(
        "capacity", parents=[common], help="ask for a capacity plan and wait for its answer"
    )
    capacity.add_argument(
        "--target",
        type=target,
        action="append",
        required=True,
        metavar="QUEUE:pNN:WAIT",
        help="a queue class or ClusterQueue, a percentile and the longest wait, e.g. "
        "training-large:p90:1h (repeat for more)",
    )
    capacity.add_argument(
        "--flavor", action="append", help="a flavor to size (default: every flavor with GPUs)"
    )
    capacity.add_argument("--growth", type=float, help="load growth, e.g. 1.3 (default 1)")
    capacity.add_argument("--seeds", type=int, help="replays per capacity (default 3, at most 10)")
    capacity.add_argument("--since", help="window start, ISO 8601 (default: 30 days ago)")
    capacity.add_argument("--until", help="window end, ISO 8601 (default: now)")
    capacity.add_argument(
        "--scenario", type=argparse.FileType("r"), help="plan on a scenario file instead"
    )
    capacity.add_argument(
        "--no-wait", action="store_true", help="print the plan's id and return at once"
    )
    capacity.add_argument(
        "--timeout", type=float, default=600.0, help="seconds to wait for the answer (600)"
    )
    capacity.set_defaults(func=cmd_plan_capacity)
    show = sub.add_parser("show", parents=[common], help="a plan's state and answers")
    show.add_argument("id", type=plan_id)
    show.set_defaults(func=cmd_plan_show)


def _wait_text(seconds: Any) -> str:
    return "-" if seconds is None else human_seconds(float(seconds))


def plan_lines(plan: dict[str, Any]) -> list[str]:
    """A plan as a terminal shows it: its state, then per flavor the answers
    and the waits at every capacity replayed."""
    state = plan.get("state")
    head = f"Plan #{plan.get('id')} ({state})"
    if state in ("queued", "running"):
        return [f"{head}: {plan.get('progress') or 0}% done; `berth plan show {plan.get('id')}`"]
    if state == "failed":
        return [f"{head}: {plan.get('error') or 'no reason given'}"]
    result = plan.get("result") or {}
    lines = [
        f"{head}: {result.get('workloads', plan.get('workloads')):,} workloads, "
        f"{plan.get('seeds')} seed(s), growth ×{plan.get('growth'):g}, "
        f"{result.get('replays')} replays in {_wait_text(result.get('seconds'))}",
        "",
    ]
    rows = []
    for flavor in result.get("flavors") or []:
        for answer in flavor.get("answers") or []:
            gpus = answer.get("gpus")
            if answer.get("served") is False:  # none of the target's queues use the flavor
                gpus_cell, change = "-", "not used"
            else:
                gpus_cell = gpus if gpus is not None else f"> {answer.get('tried_up_to')}"
                change = f"{answer['change']:+d}" if answer.get("change") is not None else "-"
            rows.append(
                [
                    flavor.get("flavor"),
                    flavor.get("current"),
                    f"{answer.get('group')} p{answer.get('percentile'):g} ≤ "
                    f"{_wait_text(answer.get('max_wait'))}",
                    gpus_cell,
                    change,
                    answer.get("nodes") if answer.get("nodes") is not None else "-",
                    {True: "yes", False: "no"}.get(answer.get("holds_today"), "-"),
                ]
            )
    lines += table(
        ["FLAVOR", "GPUS NOW", "TARGET", "GPUS NEEDED", "CHANGE", "NODES", "HOLDS NOW"], rows
    ).splitlines()
    percentiles = result.get("percentiles") or {}
    for flavor in result.get("flavors") or []:
        groups = sorted(percentiles)
        curve = [
            [point.get("gpus")] + [_point(point.get("groups", {}).get(group)) for group in groups]
            for point in flavor.get("curve") or []
        ]
        if not curve:
            continue
        lines += ["", f"{flavor.get('flavor')}: waits at each capacity replayed (median of seeds)"]
        lines += table(["GPUS"] + [f"{g} p{percentiles[g]:g}" for g in groups], curve).splitlines()
    lines += ["", "≥: a lower bound (workloads still waiting when the replay stopped)."]
    return lines


def _point(figures: Any) -> str:
    if not figures or figures.get("median") is None:
        return "-"
    text = ("≥ " if figures.get("at_least") else "") + _wait_text(figures["median"])
    low, high = figures.get("low"), figures.get("high")
    if low is not None and high is not None and high - low >= 1:
        text += f" ({_wait_text(low)}–{_wait_text(high)})"
    return text


def _follow(client: Client, plan: dict[str, Any], timeout: float) -> dict[str, Any]:
    """Poll until the plan is done, showing its progress on stderr."""
    deadline = time.monotonic() + timeout
    shown = -1
    while plan.get("state") in ("queued", "running"):
        if time.monotonic() > deadline:
            raise CliError(
                f"plan #{plan.get('id')} is still {plan.get('state')} after {timeout:g} s; "
                f"`berth plan show {plan.get('id')}` follows it"
            )
        progress = int(plan.get("progress") or 0)
        if progress != shown and sys.stderr.isatty():
            sys.stderr.write(f"\rplan #{plan.get('id')}: {progress}%")
            sys.stderr.flush()
        shown = progress
        time.sleep(POLL_SECONDS)
        plan = client.get(f"{PATH}{plan['id']}/")
    if shown >= 0 and sys.stderr.isatty():
        sys.stderr.write("\n")
    return plan


def cmd_plan_capacity(args: argparse.Namespace) -> int:
    body: dict[str, Any] = {"targets": args.target}
    if args.scenario is not None:
        if args.since or args.until:
            raise CliError("a scenario has no window: drop --since/--until", code=EXIT_USAGE)
        body["source"] = "scenario"
        body["scenario"] = args.scenario.read()
    for key, value in (
        ("flavors", args.flavor),
        ("growth", args.growth),
        ("seeds", args.seeds),
        ("window_start", args.since),
        ("window_end", args.until),
    ):
        if value is not None:
            body[key] = value
    client = connect(args)
    plan = client.call("POST", PATH, body=body)
    if not args.no_wait:
        plan = _follow(client, plan, args.timeout)
    if args.output != "table":
        emit(plan, args.output)
        return EXIT_OK
    for line in plan_lines(plan):
        print(line)
    return EXIT_ERROR if plan.get("state") == "failed" else EXIT_OK


def cmd_plan_show(args: argparse.Namespace) -> int:
    plan = connect(args).get(f"{PATH}{args.id}/")
    if args.output != "table":
        emit(plan, args.output)
        return EXIT_OK
    for line in plan_lines(plan):
        print(line)
    return EXIT_OK
