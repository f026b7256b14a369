"""Import a Kueue installation (admins): read the live cluster, or paste or
upload its YAML — e.g. a GitOps repository's files — and see the plan
``manage.py import_kueue`` prints, then import it.

**Read the cluster** asks a worker to read it (a request handler never talks
to the cluster): the page waits for the reading, then plans from it, against
the objects as the cluster holds them (with their field managers). **Plan**
stores nothing. **Import** stores the policy (history noted "imported from
cluster X by …" or "from files uploaded by …") and records the objects as
adopted; the reconcile the change queues takes them over on the cluster.
"""

from __future__ import annotations

from typing import Any

from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import reverse

from frontend.views.common import page
from frontend.views.policy import admin_only
from queues.deferred import send
from queues.kueue_import import (
    ImportReport,
    ImportSourceError,
    import_kueue,
    objects_from_text,
    takeover_lines,
)
from queues.models import KueueReading
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


def _reading(request: HttpRequest) -> KueueReading | None:
    wanted = request.POST.get("reading") or request.GET.get("reading") or ""
    if not wanted:
        return None
    reading = KueueReading.objects.filter(pk=int(wanted)).first() if wanted.isdigit() else None
    if reading is None:
        raise Http404("no such reading of the cluster")
    return reading


def _read_the_cluster(request: HttpRequest) -> HttpResponse:
    user = request.user if request.user.is_authenticated else None  # admin_only: always
    reading = KueueReading.objects.create(requested_by=user)
    send("queues.tasks.read_kueue_cluster", reading.pk, stored=f"reading #{reading.pk} requested")
    return redirect(f"{reverse('kueue-import')}?reading={reading.pk}")


@admin_only
def kueue_import(request: HttpRequest) -> HttpResponse:
    if request.method == "POST" and request.POST.get("action") == "read":
        return _read_the_cluster(request)
    reading = _reading(request)
    context: dict[str, Any] = {
        "manifests": request.POST.get("manifests", ""),
        "team_label": request.POST.get("team_label", "").strip(),
        "classes": request.POST.get("classes", ""),
        "skip": request.POST.get("skip", ""),
        "report": None,
        "problem": "",
        "reading": reading,
        # Waiting for the worker: the page reloads itself (no script).
        "refresh": reading is not None and reading.finished_at is None and not reading.error,
    }
    if request.method == "POST":
        classes, bad = _pairs(context["classes"])
        actual = None
        try:
            if bad:
                raise ImportSourceError(
                    f"queue classes: write one QUEUE=CLASS per line (CLASS empty for none), "
                    f"not {bad[0]!r}"
                )
            if reading is not None:
                if reading.finished_at is None or reading.error:
                    raise ImportSourceError(
                        reading.error or "the cluster is still being read; wait for the reading"
                    )
                objects = actual = list(reading.objects_read)
                source = f"imported from cluster {reading.cluster}"
            else:
                objects = _objects(request)
                source = "imported from files uploaded"
            if not objects:
                raise ImportSourceError("paste YAML or choose files: there is nothing to import")
        except ImportSourceError as exc:
            context["problem"] = str(exc)
        else:
            report = import_kueue(
                objects,
                actor=request.user,
                source=f"{source} by {request.user.get_username()}",
                apply=request.POST.get("action") == "apply",
                actual=actual,
                team_label=context["team_label"] or None,
                classes=classes,
                skip=[line.strip() for line in context["skip"].splitlines() if line.strip()],
                manual=configured_manual_steps(),
            )
            context["report"] = report
            context.update(_sections(report))
    return page(request, "frontend/kueue_import.html", context, nav="policy", live=False)
