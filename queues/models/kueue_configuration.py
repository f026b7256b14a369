from __future__ import annotations

from django.db import models
from django.db.models import Q

from queues.choices import PreemptionStrategies, RequeuingTimestamp
from queues.durations import MINUTE
from queues.models.base import PolicyObject

# The one row's id: the configuration is a singleton.
SINGLETON_ID = 1
FIVE_MINUTES = 5 * MINUTE


class KueueConfiguration(PolicyObject):
    """The settings of Kueue's manager configuration that Berth keeps
    (ConfigMap ``kueue-system/kueue-manager-config``): fair sharing, admission
    fair sharing and waitForPodsReady.

    One row (id 1), created by the first save. Until then Kueue's defaults
    apply and Berth renders no ConfigMap, so it claims no part of a cluster's
    Kueue configuration nobody asked it to manage. Durations are integer
    nanoseconds, Go's unit; a section that is off keeps its defaults.
    """

    fair_sharing_enable = models.BooleanField(default=False)
    fair_sharing_preemption_strategies = models.CharField(
        max_length=64,
        choices=PreemptionStrategies.choices,
        default=PreemptionStrategies.FINAL_THEN_INITIAL,
    )
    admission_fair_sharing_enable = models.BooleanField(default=False)
    usage_half_life_time_ns = models.BigIntegerField(null=True, blank=True)
    usage_sampling_interval_ns = models.BigIntegerField(default=FIVE_MINUTES)
    wait_for_pods_ready_enable = models.BooleanField(default=False)
    wait_for_pods_ready_timeout_ns = models.BigIntegerField(default=FIVE_MINUTES)
    block_admission = models.BooleanField(default=False)
    recovery_timeout_ns = models.BigIntegerField(null=True, blank=True)
    requeuing_timestamp = models.CharField(
        max_length=16, choices=RequeuingTimestamp.choices, default=RequeuingTimestamp.EVICTION
    )
    # Null: requeue without limit (Kueue's default).
    backoff_limit_count = models.IntegerField(null=True, blank=True)
    backoff_base_seconds = models.IntegerField(default=60)
    backoff_max_seconds = models.IntegerField(default=3600)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(id=SINGLETON_ID), name="kueue_configuration_singleton"
            )
        ]

    def __str__(self) -> str:
        return "Kueue configuration"

    @classmethod
    def unsaved(cls) -> KueueConfiguration:
        """Kueue's defaults, at revision 0: what an admin edits before the first save."""
        return cls(pk=SINGLETON_ID, revision=0)

    @property
    def is_saved(self) -> bool:
        return not self._state.adding
