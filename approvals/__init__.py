"""Berth as the AdmissionCheck controller for ``berth-approval``: the gate on
queues whose class requires approval (``urgent-release``).

- ``status``: the exact status shapes written to the cluster (pure);
- ``access``: who sees and decides requests;
- ``impact``: what approving costs, from the engine;
- ``lifecycle``: raising, re-approving, withdrawing and expiring requests;
- ``decide``: a person's decision, taken once (compare-and-set);
- ``apply``: writing decisions to Workloads, keeping the check Active;
- ``notify``: e-mail and the webhook;
- ``controller``: one periodic pass over all of it.
"""
