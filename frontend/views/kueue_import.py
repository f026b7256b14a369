"""Import a Kueue installation (admins): paste or upload its YAML — e.g. a
GitOps repository's files, or ``kubectl get ... -o yaml`` of a cluster — and
see the plan ``manage.py import_kueue`` prints, then import it.

**Plan** stores nothing. **Import** stores the policy (history noted "imported
from files uploaded by …") and records the objects as adopted; the reconcile
the change queues takes them over on the cluster. Reading the live cluster is
the command's job: a request handler never talks to the cluster.
"""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse

from frontend.views.common import page
from frontend.views.policy import admin_only
from queues.kueue_import import (
    ImportReport,
    ImportSourceError,
    import_kueue,
    objects_from_text,
    takeover_lines,
)
from queues.reconcile import configured_manual_steps

# Uploads beyond this are refused before reading (the body limit stops far larger).
MAX_UPLOAD_BYTES = 2 * 1024 * 1024


def _pairs(text: str) -> tuple[dict[str, str], list[str]]:
    """``QUEUE=CLASS`` lines; the lines that are not, for the error."""
    pairs: dict[str, str] = {}
    bad = []
    for line in text.splitlines():
        line = line.strip()
        if not line:
            continue
        queue, sep, queue_class = line.partition("=")
        if not sep or not queue.strip():
            bad.append(line)
        else:
            pairs[queue.strip()] = queue_class.strip()
    return pairs, bad


def _objects(request: HttpRequest) -> list[dict[str, Any]]:
    objects = objects_from_text(request.POST.get("manifests", ""), "the pasted YAML")
    for upload in request.FILES.getlist("files"):
        if upload.size and upload.size > MAX_UPLOAD_BYTES:
            raise ImportSourceError(f"{upload.name}: larger than {MAX_UPLOAD_BYTES} bytes")
        try:
            text = upload.read().decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ImportSourceError(f"{upload.name}: not UTF-8 text") from exc
        objects += objects_from_text(text, str(upload.name))
    return objects


def _sections(report: ImportReport) -> dict[str, Any]:
    policy = report.policy
    return {
        "stored": [
            (kind, report.stored.get(kind, []))
            for kind in (
                "Team",
                "Topology",
                "ResourceFlavor",
                "WorkloadPriorityClass",
                "Cohort",
                "ClusterQueue",
                "LocalQueue",
            )
            if report.stored.get(kind)
        ],
        "queues": [
            q for q in policy.cluster_queues if q["name"] in report.stored.get("ClusterQueue", [])
        ],
        "takeover": takeover_lines(report),
    }


@admin_only
def kueue_import(request: HttpRequest) -> HttpResponse:
    context: dict[str, Any] = {
        "manifests": request.POST.get("manifests", ""),
        "team_label": request.POST.get("team_label", "").strip(),
        "classes": request.POST.get("classes", ""),
        "skip": request.POST.get("skip", ""),
        "report": None,
        "problem": "",
    }
    if request.method == "POST":
        classes, bad = _pairs(context["classes"])
        try:
            if bad:
                raise ImportSourceError(
                    f"queue classes: write one QUEUE=CLASS per line (CLASS empty for none), "
                    f"not {bad[0]!r}"
                )
            objects = _objects(request)
            if not objects:
                raise ImportSourceError("paste YAML or choose files: there is nothing to import")
        except ImportSourceError as exc:
            context["problem"] = str(exc)
        else:
            report = import_kueue(
                objects,
                actor=request.user,
                source=f"imported from files uploaded by {request.user.get_username()}",
                apply=request.POST.get("action") == "apply",
                team_label=context["team_label"] or None,
                classes=classes,
                skip=[line.strip() for line in context["skip"].splitlines() if line.strip()],
                manual=configured_manual_steps(),
            )
            context["report"] = report
            context.update(_sections(report))
    return page(request, "frontend/kueue_import.html", context, nav="policy", live=False)
