"""The demo organisation, rendered from Postgres, is what Kueue's CRDs accept."""

from __future__ import annotations

from io import StringIO
from typing import Any

import jsonschema
import yaml
from django.core.management import call_command

from queues.kueue.render import KUEUE_API
from tests.kueue.crds import CEL, UPDATE_ONLY, rules_at, schema


def test_demo_organisation_renders_to_valid_kueue_objects(db: Any) -> None:
    call_command("seed_demo", "--quiet-logins", stdout=StringIO())
    out = StringIO()
    call_command("kueue_manifests", stdout=out)
    objects = [o for o in yaml.safe_load_all(out.getvalue()) if o]
    kinds = sorted({o["kind"] for o in objects})
    assert kinds == [
        "AdmissionCheck",
        "ClusterQueue",
        "Cohort",
        "LocalQueue",
        "Namespace",
        "ResourceFlavor",
        "Topology",
        "WorkloadPriorityClass",
    ]
    for obj in objects:
        if obj["apiVersion"] != KUEUE_API:
            continue
        jsonschema.Draft7Validator(schema(obj["kind"])).validate(obj)
        for _, rule, value in rules_at(schema(obj["kind"]), obj):
            if not any(m in rule for m in UPDATE_ONLY):
                assert CEL[rule](value), (obj["metadata"]["name"], rule)
