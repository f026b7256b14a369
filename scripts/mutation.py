"""Mutation testing of the rules the suite must pin (``make mutation``).

Runs mutmut (configured in pyproject's ``[tool.mutmut]``) over four targets —
the approval decision's compare-and-set and expiry, the engine's preemption
rules, the reconcile plan and the submission checks — then prints each
target's score and every mutant that survived. A survivor must be killed by a
test or listed in docs/mutation.md with the reason it is equivalent; this
exits 1 while one is neither.

    python scripts/mutation.py                 # every target
    python scripts/mutation.py plan preemption # some of them
    python scripts/mutation.py --report        # the last results, no run

mutmut works in ``mutants/`` (a copy of the sources and its results); delete
it to start afresh. Each mutant's tests run on a fresh copy of one database
migrated here first (``tests/mutation_db.py``). Needs ``DATABASE_URL``
(``make mutation`` provides one, as ``make test`` does). Not part of
``make test``: a full run takes a while.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass
from fnmatch import fnmatch
from pathlib import Path
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parent.parent
MUTANTS = ROOT / "mutants"
DOC = ROOT / "docs" / "mutation.md"
SLOTS_DIR = MUTANTS / "db-slots"
TEMPLATE = "test_berth_mutation_template"


@dataclass(frozen=True)
class Target:
    name: str
    what: str
    patterns: tuple[str, ...]


TARGETS = (
    Target(
        "decision",
        "approvals: deciding once (compare-and-set) before the deadline, and expiry",
        (
            "approvals.decide.x_decide__*",
            "approvals.decide.x__replayed__*",
            "approvals.decide.x_write_decision__*",
            "approvals.decide.x_expire__*",
            "approvals.lifecycle.x_expire_requests__*",
        ),
    ),
    Target(
        "preemption",
        "engine: who may be preempted, in what order, how many (classic preemption)",
        (
            "queues.engine.preemption.*",
            "queues.engine.victim_search.*",
            "queues.engine.first_candidates.*",
        ),
    ),
    Target(
        "plan",
        "reconcile: the plan of creates, updates, drains and deletes",
        ("queues.kueue.plan.*",),
    ),
    Target(
        "submission",
        "jobs: the rules a job request must meet before anything is written",
        (
            "jobs.validation.*",
            "jobs.request_rules.*",
            "jobs.submission.x__quantity__*",
            "jobs.submission.x__too_big_for_a_node__*",
            "jobs.submission.x__render_error__*",
        ),
    ),
)

# mutmut's exit codes of a mutant's test run (mutmut.stats.status_by_exit_code).
KILLED = {1, 3}
TIMEOUT = {24, -24, 36, 152, 255}
SURVIVED = {0}
NO_TESTS = {5, 33}


def status(code: int | None) -> str:
    if code is None:
        return "not checked"
    if code in KILLED:
        return "killed"
    if code in TIMEOUT:
        return "timeout"
    if code in SURVIVED:
        return "survived"
    if code in NO_TESTS:
        return "no tests"
    return "suspicious"


def results() -> dict[str, int | None]:
    """Every generated mutant's last exit code, by mutant name."""
    found: dict[str, int | None] = {}
    for meta in MUTANTS.rglob("*.py.meta"):
        found.update(json.loads(meta.read_text())["exit_code_by_key"])
    return found


def of_target(target: Target, codes: dict[str, int | None]) -> dict[str, int | None]:
    return {k: v for k, v in codes.items() if any(fnmatch(k, p) for p in target.patterns)}


def explained() -> set[str]:
    """Mutant names docs/mutation.md gives a reason for (in backquotes)."""
    if not DOC.exists():
        return set()
    text = DOC.read_text()
    return {part for part in text.split("`") if "__mutmut_" in part}


def report(targets: list[Target]) -> int:
    codes = results()
    reasons = explained()
    unexplained: list[str] = []
    print()
    print(f"{'target':<12} {'killed':>7} {'timeout':>8} {'survived':>9} {'other':>6} {'score':>7}")
    for target in targets:
        mine = of_target(target, codes)
        counts = Counter(status(code) for code in mine.values())
        total = len(mine)
        caught = counts["killed"] + counts["timeout"]
        other = total - caught - counts["survived"]
        score = f"{100 * caught / total:.1f}%" if total else "-"
        print(
            f"{target.name:<12} {counts['killed']:>7} {counts['timeout']:>8} "
            f"{counts['survived']:>9} {other:>6} {score:>7}   ({caught}/{total})"
        )
        for name, code in sorted(mine.items()):
            if status(code) in ("killed", "timeout"):
                continue
            known = name in reasons
            mark = "equivalent" if known and status(code) == "survived" else status(code)
            print(f"    {mark:<12} {name}")
            if not known:
                unexplained.append(name)
    print()
    if unexplained:
        print(
            f"{len(unexplained)} mutant(s) neither killed nor explained in "
            f"{DOC.relative_to(ROOT)}: `mutmut show NAME` shows one; kill it with a test, "
            "or say there why it is equivalent."
        )
        return 1
    print("Every mutant is killed or explained.")
    return 0


def drop_databases() -> None:
    """The template and the databases tests/mutation_db.py made of it."""
    import psycopg

    with psycopg.connect(os.environ["DATABASE_URL"], autocommit=True) as conn:
        names = conn.execute(
            "SELECT datname FROM pg_database WHERE datname LIKE 'test_berth_mutation_%'"
        ).fetchall()
        for (name,) in names:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def migrate_template() -> None:
    """A migrated database each mutant's pytest session copies (tests/mutation_db.py)."""
    import psycopg

    drop_databases()
    with psycopg.connect(os.environ["DATABASE_URL"], autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{TEMPLATE}"')
    url = urlsplit(os.environ["DATABASE_URL"])._replace(path=f"/{TEMPLATE}").geturl()
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"],
        cwd=ROOT,
        env={**os.environ, "DATABASE_URL": url},
        check=True,
    )


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("targets", nargs="*", help=", ".join(t.name for t in TARGETS))
    parser.add_argument("--report", action="store_true", help="print the last results only")
    parser.add_argument(
        "--survivors",
        action="store_true",
        help="run again only the mutants not killed last time (after adding tests)",
    )
    parser.add_argument("--max-children", type=int, default=os.cpu_count() or 2)
    args = parser.parse_args(argv)
    unknown = set(args.targets) - {t.name for t in TARGETS}
    if unknown:
        parser.error(f"unknown target(s): {', '.join(sorted(unknown))}")
    targets = [t for t in TARGETS if not args.targets or t.name in args.targets]
    if args.report:
        return report(targets)
    if not os.environ.get("DATABASE_URL"):
        print("DATABASE_URL is not set: run `make mutation`, which provides one", file=sys.stderr)
        return 2
    SLOTS_DIR.mkdir(parents=True, exist_ok=True)
    patterns = [p for t in targets for p in t.patterns]
    if args.survivors:
        codes = results()
        patterns = sorted(
            name
            for t in targets
            for name, code in of_target(t, codes).items()
            if status(code) not in ("killed", "timeout")
        )
        if not patterns:
            return report(targets)
    command = [
        str(Path(sys.executable).parent / "mutmut"),
        "run",
        "--max-children",
        str(args.max_children),
        *patterns,
    ]
    shown = " ".join(patterns) if not args.survivors else f"<{len(patterns)} survivors>"
    print("$ mutmut run --max-children", args.max_children, shown, flush=True)
    started = time.monotonic()
    env = {
        **os.environ,
        "BERTH_MUTATION_DB_DIR": str(SLOTS_DIR),
        "BERTH_MUTATION_DB_TEMPLATE": TEMPLATE,
    }
    try:
        migrate_template()
        run = subprocess.run(command, cwd=ROOT, env=env)
    finally:
        drop_databases()
    print(f"mutmut took {time.monotonic() - started:.0f} s (exit {run.returncode})")
    if run.returncode != 0:
        return run.returncode
    return report(targets)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
