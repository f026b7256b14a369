"""Replay a scenario's workload stream under its policy (and optionally a second
policy, on exactly the same stream), print a summary, write JSON and HTML."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from queues.engine.experiment import compare_rows, simulate
from queues.engine.report import HEADER, html_report, summary_rows
from queues.engine.scenario import ScenarioError, load


class Progress:
    """A progress line on stderr: redrawn in place on a terminal, every 10%
    otherwise (logs)."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.tty = sys.stderr.isatty()
        self.shown = -1
        self.started = time.monotonic()

    def __call__(self, done: int, total: int) -> None:
        percent = 100 * done // max(total, 1)
        step = 1 if self.tty else 10
        if percent // step == self.shown // step and done != total:
            return
        self.shown = percent
        bar = "#" * (percent // 4)
        line = (
            f"{self.label}: [{bar:<25}] {percent:3d}% {done}/{total} finished, "
            f"{time.monotonic() - self.started:.0f} s"
        )
        sys.stderr.write(("\r" + line) if self.tty else line + "\n")
        if done == total and self.tty:
            sys.stderr.write("\n")
        sys.stderr.flush()


class Command(BaseCommand):
    help = "Simulate a scenario's workload stream; --compare runs it under a second policy too."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("scenario", help="scenario YAML: policy and workload stream")
        parser.add_argument(
            "--compare",
            metavar="OTHER.yaml",
            help="a scenario whose policy replays the same workload stream",
        )
        parser.add_argument("--json", metavar="OUT", help="write the figures as JSON")
        parser.add_argument("--html", metavar="OUT", help="write a self-contained HTML report")
        parser.add_argument("--seed", type=int, help="override the generators' seed")
        parser.add_argument(
            "--requeue-delay",
            type=float,
            default=None,
            help="seconds before parked workloads queue again "
            "(default: the scenario's simulation.requeueDelay, else Kueue's 1)",
        )
        parser.add_argument(
            "--eviction-delay",
            type=float,
            default=None,
            help="seconds a preempted job takes to stop and free its quota, 0: at once "
            "(default: the scenario's simulation.evictionDelay, else 30)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            scenario = load(options["scenario"], seed=options["seed"])
            other = load(options["compare"]) if options["compare"] else None
        except ScenarioError as exc:
            raise CommandError(f"the scenario cannot run:\n{exc}") from exc
        runs = []
        labels = [Path(options["scenario"]).stem]
        policies = [scenario.policy]
        if other is not None:
            labels.append(Path(options["compare"]).stem)
            policies.append(other.policy)
        if len(labels) == 2 and labels[0] == labels[1]:
            labels = [f"{labels[0]} (current)", f"{labels[1]} (proposed)"]
        for label, policy in zip(labels, policies, strict=True):
            try:
                result, summary = simulate(
                    scenario,
                    policy,
                    progress=Progress(label),
                    requeue_delay=options["requeue_delay"],
                    eviction_delay=options["eviction_delay"],
                )
            except ScenarioError as exc:
                raise CommandError(f"{label} cannot replay the stream:\n{exc}") from exc
            runs.append((label, result, summary))
            self._print(label, summary)
        deltas = compare_rows(runs[0][2], runs[1][2]) if len(runs) == 2 else None
        if deltas:
            self.stdout.write("\nComparison")
            for row in deltas:
                self.stdout.write(f"  {row[0]:<34} {row[1]:>10} {row[2]:>10}  {row[3]}")
        if options["json"]:
            payload: dict[str, Any] = {label: summary for label, _, summary in runs}
            if deltas:
                payload["comparison"] = [
                    dict(zip(["metric", "first", "second", "change"], row, strict=True))
                    for row in deltas
                ]
            Path(options["json"]).write_text(json.dumps(payload, indent=2, default=str))
            self.stdout.write(f"wrote {options['json']}")
        if options["html"]:
            Path(options["html"]).write_text(html_report(runs, deltas), encoding="utf-8")
            self.stdout.write(f"wrote {options['html']}")

    def _print(self, label: str, summary: dict[str, Any]) -> None:
        wait = summary["time_to_admission"]
        self.stdout.write(
            f"\n{label}: {summary['workloads']} workloads, {summary['admissions']} admissions, "
            f"{summary['cycles']} cycles, {summary['simulated_seconds']:.0f} simulated s; wait "
            f"p50 {wait['p50'] or 0:.1f} s p95 {wait['p95'] or 0:.1f} s; "
            f"preemptions {sum(summary['preemptions'].values())}"
            + (
                f"; {summary['livelocks']} livelock(s): workloads preempting each other in a loop"
                if summary["livelocks"]
                else ""
            )
            + (
                f"; {summary['timed_out']} deactivated past their maximum execution time"
                if summary.get("timed_out")
                else ""
            )
        )
        widths = [
            max(len(HEADER[i]), *(len(r[i]) for r in summary_rows(summary)))
            for i in range(len(HEADER))
        ]
        self.stdout.write("  " + "  ".join(h.rjust(w) for h, w in zip(HEADER, widths, strict=True)))
        for row in summary_rows(summary):
            self.stdout.write(
                "  " + "  ".join(c.rjust(w) for c, w in zip(row, widths, strict=True))
            )
