"""``berth gang-fit``: where a multi-node job fits now, per topology-aware
flavor, through ``/api/v1/gang-fit/``: free GPUs, the largest gang (nodes x
GPUs per node) per topology level, and the nodes by free GPUs."""

import argparse
from typing import Any

from berth_cli.base import EXIT_OK
from berth_cli.commands import connect
from berth_cli.output import emit, table

HOSTNAME = "kubernetes.io/hostname"


def add_gang_fit_parser(commands: Any, common: argparse.ArgumentParser) -> None:
    gang_fit = commands.add_parser(
        "gang-fit",
        parents=[common],
        help="free GPUs per node and the largest gang that fits now",
        description="Per flavor that names a topology: the free GPUs of its nodes, the largest "
        "gang of nodes x GPUs per node one block, rack or node holds now, and how many free "
        "GPUs sit on nodes partly in use.",
    )
    gang_fit.add_argument("--flavor", help="one flavor (default: every topology-aware one)")
    gang_fit.add_argument("--nodes", action="store_true", help="also list every node")
    gang_fit.set_defaults(func=cmd_gang_fit)


def level_title(level: str) -> str:
    """A level's column: ANYWHERE, BLOCK, RACK, NODE."""
    if not level:
        return "ANYWHERE"
    if level == HOSTNAME:
        return "NODE"
    return level.rsplit("/", 1)[-1].upper()


def _nodes(count: int) -> str:
    return f"{count} node" if count == 1 else f"{count} nodes"


def flavor_lines(found: dict[str, Any], with_nodes: bool = False) -> list[str]:
    free, stranded = int(found.get("free_gpus") or 0), int(found.get("stranded_gpus") or 0)
    share = f" ({round(stranded * 100 / free)} %)" if free else ""
    topology = f" (topology {found['topology']})" if found.get("topology") else ""
    lines = [
        f"{found.get('flavor')}{topology}: {free:,} of {int(found.get('gpus') or 0):,} GPUs "
        f"free on {_nodes(int(found.get('nodes') or 0))}; "
        f"{_nodes(int(found.get('whole_free_nodes') or 0))} with every GPU free; "
        f"{stranded:,} free GPUs on nodes partly in use{share}",
        "",
        "Largest gang that fits now (nodes × GPUs per node, in one domain):",
    ]
    levels = ["", *(found.get("levels") or [])]
    largest = {(g.get("level"), g.get("gpus_per_node")): g for g in found.get("largest") or []}
    sizes = sorted({int(g.get("gpus_per_node") or 0) for g in found.get("largest") or []})
    rows = []
    for size in sizes:
        row: list[str] = [str(size)]
        for level in levels:
            gang = largest.get((level, size)) or {}
            pods = int(gang.get("pods") or 0)
            row.append(f"{pods:,} × {size}" if pods else "-")
        rows.append(row)
    headers = ("GPUS/NODE", *(level_title(level) for level in levels))
    lines.extend("  " + line for line in table(headers, rows).splitlines())
    histogram = ", ".join(
        f"{_nodes(int(count))} with {int(gpus)}"
        for gpus, count in found.get("free_histogram") or []
    )
    lines.append("")
    lines.append(f"Nodes by free GPUs: {histogram or 'none'}")
    if with_nodes:
        shown = [level for level in found.get("levels") or [] if level != HOSTNAME]
        node_rows = [
            (
                row.get("name"),
                *((row.get("domains") or {}).get(level, "") for level in shown),
                f"{int(row.get('free_gpus') or 0)} of {int(row.get('gpus') or 0)}",
            )
            for row in found.get("node_rows") or []
        ]
        lines.append("")
        node_headers = ("NODE", *(level_title(level) for level in shown), "FREE GPUS")
        lines.extend("  " + line for line in table(node_headers, node_rows).splitlines())
    return lines


def cmd_gang_fit(args: argparse.Namespace) -> int:
    client = connect(args)
    query = [("flavor", args.flavor)] if args.flavor is not None else []
    answer = client.get("gang-fit/", query)
    if args.output != "table":
        emit(answer, args.output)
        return EXIT_OK
    flavors = answer.get("flavors") or []
    if not flavors:
        print(
            "No flavor names a topology with nodes sync has seen: Berth knows where pods run "
            "only where Kueue places them (topology-aware flavors)."
        )
        return EXIT_OK
    for index, found in enumerate(flavors):
        if index:
            print()
        for line in flavor_lines(found, args.nodes):
            print(line)
    return EXIT_OK
