"""Cohort trees share no quota but can share nodes: two ClusterQueues in no
cohort, one topology-aware flavor on one 8-GPU node. What one tree places on
the node decides what fits in the other, so a workload waiting in the second
tree is admitted once the first tree's job leaves the node (no database)."""

from __future__ import annotations

import pytest
import yaml

from queues.engine.scenario import parse
from queues.engine.simulator import Simulator

POLICY = """
topologies:
  - name: racks
    levels: [{nodeLabel: topology.berth.dev/rack}, {nodeLabel: kubernetes.io/hostname}]
resourceFlavors: [{name: h100, topologyName: racks}]
nodes:
  - {name: n, count: 1, labels: {topology.berth.dev/rack: r1}, capacity: {nvidia.com/gpu: 8}}
clusterQueues:
  - name: team-a
    queueingStrategy: STRATEGY
    resourceGroups:
      - coveredResources: [nvidia.com/gpu]
        flavors: [{name: h100, resources: [{name: nvidia.com/gpu, nominalQuota: 8}]}]
  - name: team-b
    queueingStrategy: STRATEGY
    resourceGroups:
      - coveredResources: [nvidia.com/gpu]
        flavors: [{name: h100, resources: [{name: nvidia.com/gpu, nominalQuota: 8}]}]
workloads:
  - {name: first, clusterQueue: team-a, creationTime: 0, runtime: 10,
     podSets: [{requests: {nvidia.com/gpu: 8}}]}
  # Within team-b's quota, but the node is full until t=10.
  - {name: waits, clusterQueue: team-b, creationTime: 1, runtime: 10,
     podSets: [{requests: {nvidia.com/gpu: 8}}]}
"""


@pytest.mark.parametrize(
    ("strategy", "admitted_at"),
    [
        ("StrictFIFO", 10.0),  # nominated again in the cycle after the node frees
        ("BestEffortFIFO", 11.0),  # parked, queued again a requeue delay later
    ],
)
@pytest.mark.parametrize("reuse", [True, False])
def test_a_node_freed_by_one_tree_admits_the_other_trees_head(
    strategy: str, admitted_at: float, reuse: bool
) -> None:
    scenario = parse(yaml.safe_load(POLICY.replace("STRATEGY", strategy)))
    simulator = Simulator(
        scenario.policy, [(w, "class") for w in scenario.workloads], requeue_delay=1.0
    )
    simulator.scheduler.reuse_nominations = reuse
    records = simulator.run().records
    assert records["default/first"].first_admitted == 0.0
    assert records["default/waits"].first_admitted == admitted_at
