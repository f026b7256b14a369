"""The embedded mode has no Celery beat: its loop reverts ended grants itself."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.utils import timezone

from controlplane.embedded import EmbeddedLoop
from grants.models import GrantState, QuotaGrant
from tests.grants.test_grant_lifecycle import grant_approved, nominal
from tests.jobs.conftest import Org


def test_the_embedded_loop_reverts_a_grant_whose_end_passed(org: Org, carol: Any) -> None:
    grant = grant_approved(org, carol)
    assert nominal("research") == 32
    EmbeddedLoop().run_once()
    grant.refresh_from_db()
    assert grant.state == GrantState.ACTIVE  # its end is days away

    QuotaGrant.objects.filter(pk=grant.pk).update(ends_at=timezone.now() - timedelta(minutes=5))
    EmbeddedLoop().run_once()
    grant.refresh_from_db()
    assert grant.state == GrantState.ENDED
    assert nominal("research") == 16
