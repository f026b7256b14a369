"""Expiring quota grants: extra quota for a team's ClusterQueue for a window,
asked for with a justification, decided once by an approver, applied to the
policy through the normal policy services (history, reconcile), and reverted
by delta at its end (``grants.tasks.revert_ended_grants``)."""
