"""The Kueue configuration page, for platform admins: fair sharing, admission
fair sharing and waitForPodsReady, the settings of Kueue's manager
configuration that Berth keeps.

Like the other policy editors (``frontend.views.policy``), the form goes
through the API's serializer and the same service, so it obeys the same rules
and writes the same history; **Plan** shows what would change in the rendered
ConfigMap and saves nothing, **Apply** saves against the revision the page was
opened at. On a real cluster Berth never writes Kueue's manager ConfigMap: the
page says so and shows the keys an admin of the cluster merges by hand.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import reverse

from frontend.kueue_config_form import form_sections, form_values, read_form, request_body
from frontend.policy_kinds import OBJECT_HISTORY
from frontend.policy_plan import PolicyPlan, dry_run
from frontend.views.common import page
from frontend.views.policy import admin_only, applied_banner, history_rows, posted_revision
from queues import selectors, services, snapshots
from queues.api.conventions import flatten_errors
from queues.api.kueue_configuration import KueueConfigurationSerializer
from queues.backends import configured_backend_writes_kueue_manager_config
from queues.choices import PolicyKind
from queues.errors import FieldError, PolicyConflict, PolicyInvalid
from queues.kueue import manager_config
from queues.models import PolicyChange
from queues.reconcile import policy_version
from queues.services import StaleRevision
from queues.services.kueue_configuration import OBJECT_NAME


@dataclass
class ConfigurationForm:
    """What the page shows: the form's values, and what the last button did."""

    values: dict[str, Any]
    revision: int
    plan: PolicyPlan | None = None
    errors: tuple[FieldError, ...] = ()
    stale: str = ""
    message: str = ""


def _render(request: HttpRequest, form: ConfigurationForm) -> HttpResponse:
    configuration = selectors.kueue_configuration()
    snapshot = snapshots.kueue_configuration(configuration)
    entries = selectors.history_for(request.user).filter(
        kind=PolicyKind.KUEUE_CONFIGURATION, object_name=OBJECT_NAME
    )
    context = {
        "configuration": configuration,
        "saved": configuration.is_saved,
        "revision": form.revision,
        "sections": form_sections(form.values, form.errors),
        "errors": form.errors,
        "plan": form.plan,
        "stale": form.stale,
        "message": form.message,
        "manual": not configured_backend_writes_kueue_manager_config(),
        "manager_config": manager_config,
        "merge_yaml": manager_config.configuration_yaml(snapshot),
        "history": history_rows(list(entries[:OBJECT_HISTORY])),
        "applied": applied_banner(request, PolicyKind.KUEUE_CONFIGURATION, OBJECT_NAME),
        "api_url": reverse("policy-kueue-configuration"),
    }
    # A refused edit is the form again, with its errors: 200, as on the other editors.
    return page(request, "frontend/kueue_configuration.html", context, nav="policy", live=False)


def _validated(values: dict[str, Any]) -> dict[str, Any]:
    """The form's request through the API's serializer: the same types and
    error paths as ``PUT /api/v1/policy/kueue-configuration/``."""
    serializer = KueueConfigurationSerializer(data=request_body(values))
    if not serializer.is_valid():
        raise PolicyInvalid(flatten_errors(serializer.errors))
    return dict(serializer.validated_data)


@admin_only
def kueue_configuration(request: HttpRequest) -> HttpResponse:
    configuration = selectors.kueue_configuration()
    stored = form_values(snapshots.kueue_configuration(configuration))
    form = ConfigurationForm(stored, configuration.revision)
    if request.method != "POST":
        return _render(request, form)
    action = request.POST.get("action", "plan")
    form.values = read_form(request.POST)
    try:
        form.revision = posted_revision(request.POST)
        revision = form.revision
        data = _validated(form.values)

        def update() -> None:
            services.kueue_configuration.update(
                actor=request.user, data=data, expected_revision=revision
            )

        if action != "apply":
            form.plan = dry_run(update)
            return _render(request, form)
        mark = policy_version()
        update()
    except StaleRevision as exc:
        form.stale = exc.message
        form.errors = (FieldError("revision", exc.rule, exc.message),)
        return _render(request, form)
    except PolicyConflict as exc:  # pragma: no cover - the service raises only StaleRevision
        form.errors = (FieldError("revision", exc.rule, exc.message),)
        return _render(request, form)
    except PolicyInvalid as exc:
        form.errors = tuple(exc.errors)
        return _render(request, form)
    entry = (
        PolicyChange.objects.filter(pk__gt=mark, kind=PolicyKind.KUEUE_CONFIGURATION)
        .order_by("pk")
        .first()
    )
    if entry is None:
        current = selectors.kueue_configuration()
        form = ConfigurationForm(
            form_values(snapshots.kueue_configuration(current)), current.revision
        )
        form.message = "Nothing to apply: the form says what the configuration already says."
        return _render(request, form)
    return redirect(f"{reverse('kueue-configuration-editor')}?applied={entry.pk}")
