"""Rules a job request must meet on its own, before any policy is consulted:
names, image reference, labels, environment, checkpoint URI. Each broken rule
is a ``FieldError`` naming the field and a stable rule id. Durations (``2h``,
``1h30m``) are read by ``berth_cli.durations``, which the CLI ships too, so
they read the same on a laptop and in the API.

Pure Python: no Django, no kubernetes client.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from jobs.manifest_spec import CONTROLLER_ENV
from queues.errors import FieldError
from queues.names import dns_label_error, label_value_error, qualified_name_error

# A job's name becomes pod host names (<name>-<index>) and the JobSet's
# <name>-<replicatedJob>-<job>-<index>: keep room for the suffixes.
JOB_NAME_MAX = 40
# Docker's reference grammar: [registry[:port]/]path[:tag][@digest].
_IMAGE = re.compile(
    r"(?:(?P<registry>(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)"
    r"(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)*(?::[0-9]+)?|\[[0-9a-fA-F:]+\](?::[0-9]+)?)/)?"
    r"(?P<path>[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*)"
    r"(?::(?P<tag>[\w][\w.-]{0,127}))?"
    r"(?:@(?P<digest>[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}))?"
)
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_CHECKPOINT = re.compile(r"(?P<scheme>[a-z][a-z0-9+.-]*)://(?P<rest>\S+)")
CHECKPOINT_SCHEMES = ("s3", "gs", "az", "abfs", "abfss", "hdfs", "pvc", "file", "oci", "nfs")
# Label prefixes Berth and Kueue set; a user label there would change admission.
RESERVED_LABEL_PREFIXES = ("kueue.x-k8s.io/", "workload.ai/", "berth.dev/", "app.kubernetes.io/")
# What Berth wires itself (rendezvous, checkpoint); a user value would break it.
RESERVED_ENV = frozenset(
    {
        "MASTER_ADDR",
        "MASTER_PORT",
        "WORLD_SIZE",
        "NODE_RANK",
        "NPROC_PER_NODE",
        "CHECKPOINT_URI",
        "CHECKPOINT_DIR",
        # torchrun's defaults, which Berth sets on every kind
        "PET_MASTER_ADDR",
        "PET_MASTER_PORT",
        "PET_NNODES",
        "PET_NODE_RANK",
        "PET_NPROC_PER_NODE",
    }
)
MAX_ENV = 100
MAX_LABELS = 32


def name_errors(name: Any, field: str = "name") -> list[FieldError]:
    if not isinstance(name, str):
        return [FieldError(field, "type", "must be a string")]
    problem = dns_label_error(name)
    if problem:
        return [FieldError(field, "dns-label", f"the job name {problem}")]
    if not name[:1].isalpha():
        # The job's Service (and a TrainJob's name) must be an RFC 1035 label.
        return [FieldError(field, "dns-1035-label", "the job name must start with a letter")]
    if len(name) > JOB_NAME_MAX:
        return [
            FieldError(
                field,
                "job-name-length",
                f"is {len(name)} characters long; job names may have at most {JOB_NAME_MAX} "
                "(pod host names add the node index and must stay within 63)",
            )
        ]
    return []


def image_errors(image: Any, field: str = "image") -> list[FieldError]:
    if not isinstance(image, str) or not image:
        return [FieldError(field, "required", "name the container image, e.g. REG/trainer:1.0")]
    if len(image) > 512 or not _IMAGE.fullmatch(image):
        return [
            FieldError(
                field,
                "image-reference",
                f"{image[:80]!r} is not a valid image reference: use "
                "[registry[:port]/]path[:tag][@sha256:digest] with a lowercase path",
            )
        ]
    return []


def command_errors(command: Any, field: str = "command") -> list[FieldError]:
    if not isinstance(command, list) or not command:
        return [FieldError(field, "required", "give the training command (after `--` in the CLI)")]
    for index, part in enumerate(command):
        if not isinstance(part, str) or not part:
            return [FieldError(f"{field}[{index}]", "type", "must be a non-empty string")]
    if sum(len(p) for p in command) > 32768:
        return [FieldError(field, "too-long", "the command is longer than 32 KiB")]
    return []


def env_errors(env: Mapping[str, Any], field: str = "env", kind: str = "Job") -> list[FieldError]:
    errors = []
    reserved = RESERVED_ENV | CONTROLLER_ENV.get(kind, frozenset())
    if len(env) > MAX_ENV:
        errors.append(FieldError(field, "too-many", f"at most {MAX_ENV} variables"))
    for name, value in sorted(env.items()):
        where = f"{field}.{name}"
        if not _ENV_NAME.fullmatch(name):
            errors.append(
                FieldError(where, "env-name", f"{name!r} is not a valid environment variable name")
            )
        elif name in reserved:
            errors.append(
                FieldError(
                    where,
                    "env-reserved",
                    f"{name} is set by Berth or the {kind} controller (rendezvous or "
                    "checkpoint wiring); leave it out",
                )
            )
        if not isinstance(value, str):
            errors.append(FieldError(where, "type", "must be a string"))
    return errors


def label_errors(labels: Mapping[str, Any], field: str = "labels") -> list[FieldError]:
    errors = []
    if len(labels) > MAX_LABELS:
        errors.append(FieldError(field, "too-many", f"at most {MAX_LABELS} labels"))
    for key, value in sorted(labels.items()):
        where = f"{field}.{key}"
        problem = qualified_name_error(key)
        if problem:
            errors.append(FieldError(where, "label-key", problem))
            continue
        if key.startswith(RESERVED_LABEL_PREFIXES):
            errors.append(
                FieldError(
                    where,
                    "label-reserved",
                    f"labels under {key.split('/')[0]}/ are set by Berth; choose another key",
                )
            )
        if not isinstance(value, str):
            errors.append(FieldError(where, "type", "must be a string"))
        elif problem := label_value_error(value):
            errors.append(FieldError(where, "label-value", problem))
    return errors


def checkpoint_errors(uri: str, field: str = "checkpoint_uri") -> list[FieldError]:
    if not uri:
        return []
    match = _CHECKPOINT.fullmatch(uri)
    if match is None or match.group("scheme") not in CHECKPOINT_SCHEMES:
        return [
            FieldError(
                field,
                "checkpoint-uri",
                f"{uri[:80]!r} is not a checkpoint location: use one of "
                + ", ".join(f"{s}://" for s in CHECKPOINT_SCHEMES),
            )
        ]
    return []


def gang_errors(
    nodes: int,
    kind: str,
    min_nodes: Any,
    topology_required: str,
    topology_preferred: str,
) -> list[FieldError]:
    """Partial admission and topology requests (``min_nodes``, ``topology_*``)."""
    errors = []
    if min_nodes is not None:
        if kind != "Job":
            errors.append(
                FieldError(
                    "min_nodes",
                    "job-kind-only",
                    "Kueue admits fewer nodes than asked only for kind Job; leave it out",
                )
            )
        elif not 1 <= int(min_nodes) <= nodes:
            errors.append(
                FieldError("min_nodes", "range", f"must be at least 1 and at most nodes ({nodes})")
            )
    if topology_required and topology_preferred:
        errors.append(
            FieldError(
                "topology_preferred",
                "one-of",
                "give topology_required or topology_preferred, not both",
            )
        )
    for field, level in (
        ("topology_required", topology_required),
        ("topology_preferred", topology_preferred),
    ):
        problem = qualified_name_error(level) if level else None
        if problem:
            errors.append(FieldError(field, "label-key", f"{level!r}: {problem}"))
    return errors


def shape_errors(
    nodes: int, gpus_per_node: int, kind: str, kinds: Sequence[str]
) -> list[FieldError]:
    errors = []
    if kind not in kinds:
        errors.append(FieldError("kind", "unsupported-value", "use one of: " + ", ".join(kinds)))
    if nodes < 1:
        errors.append(FieldError("nodes", "minimum", "a job needs at least one node"))
    if nodes > 1024:
        errors.append(FieldError("nodes", "maximum", "at most 1024 nodes"))
    if gpus_per_node < 0:
        errors.append(FieldError("gpus_per_node", "minimum", "must not be negative"))
    return errors
