"""What a rendered job is made of: the request as the renderer takes it
(``JobSpec``), and the names Kueue, JobSet, Kubeflow and Berth read on the
objects (labels, annotations, container names, the controller's own
environment). Pure Python: no Django, no kubernetes client."""

from __future__ import annotations

from dataclasses import dataclass, field

from jobs.placement import Placement

JOB_KINDS = ("Job", "JobSet", "PyTorchJob", "TrainJob")
API_VERSIONS = {
    "Job": "batch/v1",
    "JobSet": "jobset.x-k8s.io/v1alpha2",
    "PyTorchJob": "kubeflow.org/v1",
    "TrainJob": "trainer.kubeflow.org/v1alpha1",
}

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
# Kueue's cap on admitted time, summed over admissions (preemption does not reset it).
MAX_EXEC_TIME_LABEL = "kueue.x-k8s.io/max-exec-time-seconds"
# Kueue reads these as the simulated cluster does (queues.simulation.job_kinds).
REQUIRED_TOPOLOGY = "kueue.x-k8s.io/podset-required-topology"
PREFERRED_TOPOLOGY = "kueue.x-k8s.io/podset-preferred-topology"
MIN_PARALLELISM = "kueue.x-k8s.io/job-min-parallelism"
TYPE_LABEL = "workload.ai/type"
FRAMEWORK_LABEL = "workload.ai/framework"
CHECKPOINT_LABEL = "workload.ai/checkpoint"
TEAM_LABEL = "workload.ai/team"
MANAGED_BY = "app.kubernetes.io/managed-by"
MANAGER = "berth"
# Label values cannot hold a URI, so the checkpoint location is an annotation.
CHECKPOINT_URI_ANNOTATION = "workload.ai/checkpoint-uri"
# Keys under these prefixes are Berth's and Kueue's: a user value would change
# admission or what the dashboard reports.
RESERVED_LABEL_PREFIXES = ("kueue.x-k8s.io/", "workload.ai/", "berth.dev/", "app.kubernetes.io/")
RESERVED_ANNOTATION_PREFIXES = ("kueue.x-k8s.io/", "workload.ai/")

WORKLOAD_TYPES = {
    "interactive-dev": "interactive",
    "training-large": "training",
    "eval-batch": "evaluation",
    "urgent-release": "release",
}
DEFAULT_WORKLOAD_TYPE = "training"
FRAMEWORK = "pytorch"

COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
CONTAINERS = {"Job": "trainer", "JobSet": "trainer", "PyTorchJob": "pytorch", "TrainJob": "node"}
# The JobSet's one replicated job, and the trainer step of Kubeflow's
# torch runtimes (its replicated job and container are both named "node").
NODE = "node"
RENDEZVOUS_PORT_NAME = "rendezvous"
# The training operator reads the master port from this container port.
PYTORCH_PORT_NAME = "pytorchjob-port"
TRAINER_API_GROUP = "trainer.kubeflow.org"
RUNTIME_PATCH_MANAGER = "berth.dev/job-render"
LOOPBACK = "127.0.0.1"
# What the kind's own controller puts in the environment (the Trainer's webhook
# refuses a TrainJob that sets these; the operator's values would win anyway).
_PET = {"PET_MASTER_ADDR", "PET_MASTER_PORT", "PET_NNODES", "PET_NODE_RANK", "PET_NPROC_PER_NODE"}
CONTROLLER_ENV = {
    "PyTorchJob": frozenset({"MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK", *_PET}),
    "TrainJob": frozenset(_PET),
}

CHECKPOINT_VOLUME = "berth-checkpoint"
CHECKPOINT_MOUNT = "/checkpoint"
INT32_MAX = 2**31 - 1


@dataclass(frozen=True)
class JobSpec:
    name: str
    namespace: str
    team: str
    kind: str
    image: str
    command: list[str]  # the training command after `--`
    nodes: int
    gpus_per_node: int
    local_queue: str
    priority_class: str
    queue_class: str
    env: dict[str, str] = field(default_factory=dict)
    cpu_per_node_milli: int | None = None
    memory_per_node_bytes: int | None = None
    checkpoint_uri: str = ""
    max_runtime_seconds: int | None = None
    retries: int = 0
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    placement: Placement = field(default_factory=lambda: Placement({}, []))
    training_runtime: str = "torch-distributed"  # TrainJob's ClusterTrainingRuntime name
    # Kueue's partial admission (kind Job: as few nodes will do) and topology
    # requests (the level, a node label, all the job's nodes share).
    min_nodes: int | None = None
    topology_required: str = ""
    topology_preferred: str = ""
    termination_grace_seconds: int = 300
    gpu_resource: str = "nvidia.com/gpu"
    master_port: int = 29500

    @property
    def nproc_per_node(self) -> int:
        """torchrun processes per node: one per GPU, one for a CPU-only job."""
        return max(1, self.gpus_per_node)
