"""``berth usage``: a month's GPU-hours and cost (showback), grouped by team,
workload type and/or flavor, through ``/api/v1/reports/usage/``."""

import argparse
import sys
from typing import Any

from berth_cli.base import EXIT_OK, EXIT_USAGE, CliError
from berth_cli.commands import connect
from berth_cli.output import emit, table

DIMENSIONS = ("team", "type", "flavor")
HEADERS = {"team": "TEAM", "type": "TYPE", "flavor": "FLAVOR"}


def add_usage_parser(commands: Any, common: argparse.ArgumentParser) -> None:
    usage = commands.add_parser(
        "usage",
        parents=[common],
        help="a month's GPU-hours and cost per team, workload type or flavor",
        description="GPU-hours allocated by Kueue, busy and lost to preemption, and their "
        "cost at each flavor's price in force, for a month (UTC); your teams only, unless "
        "you are a platform admin.",
    )
    usage.add_argument("--month", help="YYYY-MM (default: this month)")
    usage.add_argument(
        "--group-by",
        default=None,
        metavar="DIMS",
        help="any of team,type,flavor, comma-separated, in order (default: team)",
    )
    usage.add_argument("--team", help="one team's figures only")
    usage.add_argument(
        "--csv", action="store_true", help="print the report as CSV (the API's own file)"
    )
    usage.set_defaults(func=cmd_usage)


def _hours(value: Any) -> str:
    if value is None:
        return "-"
    return f"{float(value):,.1f}"


def _money(value: Any) -> str:
    return "-" if value is None else f"{float(value):,.2f}"


def _pairs(pairs: Any) -> str:
    if not pairs:
        return "-"
    return ", ".join(f"{p.get('team') or 'shared'} {_hours(p.get('gpu_hours'))}" for p in pairs)


def _key(name: str, value: Any) -> str:
    if name == "team" and not value:
        return "(no team)"
    return str(value or "-")


def usage_lines(report: dict[str, Any]) -> list[str]:
    """The report as a table, a total line, and what the numbers are."""
    group_by = [g for g in report.get("group_by") or [] if g in DIMENSIONS]
    currency = str(report.get("currency") or "")
    by_type = "type" in group_by
    headers = [HEADERS[g] for g in group_by] + [
        "ALLOCATED GPU-H",
        "BUSY GPU-H",
        "LOST GPU-H",
        f"COST {currency}",
        f"LOST COST {currency}",
    ]
    if not by_type:
        headers += ["BORROWED GPU-H", "FROM", "LENT GPU-H", "TO"]

    def cells(keys: list[str], figures: dict[str, Any]) -> list[str]:
        row = [
            *keys,
            _hours(figures.get("allocated_gpu_hours")),
            _hours(figures.get("busy_gpu_hours")),
            _hours(figures.get("lost_gpu_hours")),
            _money(figures.get("cost")),
            _money(figures.get("lost_cost")),
        ]
        if not by_type:
            row += [
                _hours(figures.get("borrowed_gpu_hours")),
                _pairs(figures.get("borrowed_from")),
                _hours(figures.get("lent_gpu_hours")),
                _pairs(figures.get("lent_to")),
            ]
        return row

    rows = [cells([_key(g, r.get(g)) for g in group_by], r) for r in report.get("rows") or []]
    month = report.get("month")
    if not rows:
        return [f"No GPU time recorded in {month}."]
    totals = report.get("totals") or {}
    rows.append(cells(["TOTAL"] + [""] * (len(group_by) - 1), totals))
    lines = table(headers, rows).splitlines()
    lines.append("")
    note = (
        f"{month} (UTC). Cost in {currency} at each flavor's price per GPU-hour in force; "
        "lost: work since the last checkpoint thrown away by preemption."
    )
    unpriced = totals.get("unpriced_gpu_hours") or 0
    if unpriced:
        note += f" {_hours(unpriced)} GPU-h ran on flavors without a price (not in the cost)."
    if by_type:
        note += " Borrowing is a queue's: group by team or flavor to see it."
    lines.append(note)
    return lines


def cmd_usage(args: argparse.Namespace) -> int:
    client = connect(args)
    query: list[tuple[str, str]] = []
    if args.month is not None:
        query.append(("month", args.month))
    if args.group_by is not None:
        query.append(("group_by", args.group_by))
    if args.team is not None:
        query.append(("team", args.team))
    if args.csv:
        if getattr(args, "output", "table") != "table":
            raise CliError("--csv and --output are two formats: choose one", code=EXIT_USAGE)
        sys.stdout.write(client.get_text("reports/usage/", [*query, ("format", "csv")]))
        return EXIT_OK
    report = client.get("reports/usage/", query)
    if args.output != "table":
        emit(report, args.output)
        return EXIT_OK
    for line in usage_lines(report):
        print(line)
    return EXIT_OK
