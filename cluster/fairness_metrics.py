"""Fair shares in ``/metrics``, from the figures the last evaluation kept
(``TeamFairness``, 1 query; a 7-day window is computed by the beat task, not
by a scrape). deploy/base/prometheus-rules.yaml alerts on them:
``berth_team_fair_share_ratio < berth_team_fair_share_starved_below`` (the
same labels, so they match one to one) while ``berth_team_waiting_gpus > 0``.
"""

from __future__ import annotations

from collections.abc import Iterator

from cluster.fairness import default_starved_below
from cluster.fairness_shares import WINDOWS
from queues.metric_families import Family, gauge, timestamp
from queues.models import TeamFairness


def fairness_metrics() -> list[Family]:
    ratio = gauge(
        "berth_team_fair_share_ratio",
        "GPU-hours the team's ClusterQueues held over what they deserved (nominal quota, "
        "plus the weighted share of what the cohort lends with fair sharing on, capped by "
        "what they asked), counted while the team had work waiting, over the window. "
        "Absent while the team waited less than a tenth of the window or was owed nothing.",
    )
    threshold = gauge(
        "berth_team_fair_share_starved_below",
        "The team is starved below this fair-share ratio (its own, or "
        "BERTH_FAIR_SHARE_STARVED_BELOW); labelled like berth_team_fair_share_ratio.",
    )
    received = gauge(
        "berth_team_fair_share_received_gpu_hours",
        "GPU-hours the team's ClusterQueues held while it had work waiting, over the window.",
    )
    deserved = gauge(
        "berth_team_fair_share_deserved_gpu_hours",
        "GPU-hours the team deserved while it had work waiting, over the window.",
    )
    waiting = gauge(
        "berth_team_waiting_gpus",
        "GPUs the pending workloads in the team's ClusterQueues asked for at the evaluation.",
    )
    starved = gauge(
        "berth_team_fair_share_starved",
        "1 while Berth counts the team starved (over 1h, the episode its notices follow).",
    )
    evaluated = gauge(
        "berth_fair_share_evaluated_timestamp_seconds",
        "When Berth last evaluated the teams' fair shares (every minute, by beat).",
    )
    default = float(default_starved_below())
    rows = TeamFairness.objects.filter(evaluated_at__isnull=False).values_list(
        "team__slug", "starved_below", "figures", "waiting_gpus", "starved_since", "evaluated_at"
    )
    newest = None
    for slug, own, figures, waiting_gpus, since, at in rows:
        if at is not None and (newest is None or at > newest):
            newest = at
        below = default if own is None else float(own)
        waiting.add(waiting_gpus, {"team": slug})
        starved.add(int(since is not None), {"team": slug})
        for label, _ in WINDOWS:
            window = (figures or {}).get(label) or {}
            labels = {"team": slug, "window": label}
            threshold.add(below, labels)
            received.add(float(window.get("received") or 0.0), labels)
            deserved.add(float(window.get("deserved") or 0.0), labels)
            if window.get("ratio") is not None:
                ratio.add(float(window["ratio"]), labels)
    if (stamp := timestamp(newest)) is not None:
        evaluated.add(stamp)
    return [ratio, threshold, received, deserved, waiting, starved, evaluated]


class FairnessCollector:
    """The families above, read when Prometheus scrapes."""

    def collect(self) -> Iterator[Family]:
        yield from fairness_metrics()
