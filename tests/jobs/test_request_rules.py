"""The submission checks on their own (``jobs.validation`` and
``jobs.request_rules``, no database): each broken rule is exactly one error
naming the field, the stable rule id and the words a person reads, and each
limit holds at its edge."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import override_settings

from jobs import validation as v
from jobs.manifest_spec import JOB_KINDS
from jobs.placement import RenderError
from jobs.request_rules import class_rules, own_rules
from jobs.submission import _quantity, _render_error, _too_big_for_a_node
from queues.errors import FieldError as E
from queues.errors import PolicyInvalid
from queues.models import ClusterQueue, QueueClass

DNS_RULE = (
    "use lowercase letters, digits and '-', starting and ending with a letter or digit "
    "(RFC 1123 label)"
)
KEY_RULE = (
    "is not a valid key: an optional DNS prefix and '/', then letters, digits, '-', '_' "
    "and '.', starting and ending with a letter or digit"
)


# ------------------------------------------------------------------ names


def test_a_job_name_is_a_string() -> None:
    assert v.name_errors(None) == [E("name", "type", "must be a string")]
    assert v.name_errors(7, field="jobs[0].name") == [E("jobs[0].name", "type", "must be a string")]


def test_a_job_name_is_a_dns_label_starting_with_a_letter() -> None:
    assert v.name_errors("Qwen_SFT") == [
        E("name", "dns-label", f"the job name 'Qwen_SFT' is not a valid name: {DNS_RULE}")
    ]
    assert v.name_errors("", field="n") == [E("n", "dns-label", "the job name must not be empty")]
    assert v.name_errors("7b-sft") == [
        E("name", "dns-1035-label", "the job name must start with a letter")
    ]
    assert v.name_errors("7b-sft", field="n")[0].field == "n"
    assert v.name_errors("q7b-sft") == []


def test_a_job_name_has_at_most_40_characters() -> None:
    assert v.name_errors("a" * 40) == []
    assert v.name_errors("a" * 41, field="n") == [
        E(
            "n",
            "job-name-length",
            "is 41 characters long; job names may have at most 40 "
            "(pod host names add the node index and must stay within 63)",
        )
    ]


# ------------------------------------------------------------------ image and command


def test_an_image_is_required() -> None:
    message = "name the container image, e.g. REG/trainer:1.0"
    for image in (None, "", 5):
        assert v.image_errors(image) == [E("image", "required", message)]
    assert v.image_errors("", field="i") == [E("i", "required", message)]


@pytest.mark.parametrize(
    "image",
    [
        "trainer",
        "reg.example.com:5000/team/trainer:1.0",
        "trainer@sha256:" + "a" * 64,
        "[fd00::1]:5000/trainer",
        "a" * 512,
    ],
)
def test_valid_image_references(image: str) -> None:
    assert v.image_errors(image) == []


def test_an_image_reference_follows_dockers_grammar_and_its_length() -> None:
    hint = "[registry[:port]/]path[:tag][@sha256:digest] with a lowercase path"
    assert v.image_errors("Trainer:1.0") == [
        E("image", "image-reference", f"'Trainer:1.0' is not a valid image reference: use {hint}")
    ]
    long = "a" * 513
    assert v.image_errors(long, field="i") == [
        E("i", "image-reference", f"{'a' * 80!r} is not a valid image reference: use {hint}")
    ]


def test_a_command_is_a_non_empty_list_of_non_empty_strings() -> None:
    required = "give the training command (after `--` in the CLI)"
    for command in (None, [], "python train.py"):
        assert v.command_errors(command) == [E("command", "required", required)]
    assert v.command_errors([], field="c") == [E("c", "required", required)]
    assert v.command_errors(["python", "", 3]) == [
        E("command[1]", "type", "must be a non-empty string")
    ]
    assert v.command_errors(["python", 3], field="c") == [
        E("c[1]", "type", "must be a non-empty string")
    ]
    assert v.command_errors(["python", "train.py"]) == []


def test_a_command_has_at_most_32_kib() -> None:
    assert v.command_errors(["x" * 32000, "y" * 768]) == []
    assert v.command_errors(["x" * 32000, "y" * 769], field="c") == [
        E("c", "too-long", "the command is longer than 32 KiB")
    ]


# ------------------------------------------------------------------ env and labels


def test_env_names_values_and_reserved_names() -> None:
    assert v.env_errors({"LR": "0.1", "_X1": ""}) == []
    assert v.env_errors({"1BAD": 3, "MASTER_ADDR": "x", "OK": None}) == [
        E("env.1BAD", "env-name", "'1BAD' is not a valid environment variable name"),
        E("env.1BAD", "type", "must be a string"),
        E(
            "env.MASTER_ADDR",
            "env-reserved",
            "MASTER_ADDR is set by Berth or the Job controller (rendezvous or checkpoint "
            "wiring); leave it out",
        ),
        E("env.OK", "type", "must be a string"),
    ]
    assert v.env_errors({"A-B": "x"}, field="e") == [
        E("e.A-B", "env-name", "'A-B' is not a valid environment variable name")
    ]


def test_the_controller_of_the_kind_reserves_its_own_variables() -> None:
    assert v.env_errors({"RANK": "0"}) == []
    assert v.env_errors({"RANK": "0"}, kind="PyTorchJob") == [
        E(
            "env.RANK",
            "env-reserved",
            "RANK is set by Berth or the PyTorchJob controller (rendezvous or checkpoint "
            "wiring); leave it out",
        )
    ]


def test_at_most_100_env_variables() -> None:
    env = {f"V{i}": "x" for i in range(100)}
    assert v.env_errors(env) == []
    env["V100"] = "x"
    assert v.env_errors(env, field="e") == [E("e", "too-many", "at most 100 variables")]


def test_label_keys_values_and_reserved_prefixes() -> None:
    assert v.label_errors({"owner": "ml-team", "berth.example/x": ""}) == []
    assert v.label_errors(
        {
            "bad key": 1,
            "kueue.x-k8s.io/queue-name": 5,
            "owner": "not a value",
            "team": 3,
        }
    ) == [
        E("labels.bad key", "label-key", f"'bad key' {KEY_RULE}"),
        E(
            "labels.kueue.x-k8s.io/queue-name",
            "label-reserved",
            "labels under kueue.x-k8s.io/ are set by Berth; choose another key",
        ),
        E("labels.kueue.x-k8s.io/queue-name", "type", "must be a string"),
        E(
            "labels.owner",
            "label-value",
            "'not a value' is not a valid label value: letters, digits, '-', '_' and '.', "
            "starting and ending with a letter or digit",
        ),
        E("labels.team", "type", "must be a string"),
    ]
    assert v.label_errors({"app.kubernetes.io/name": "x"}, field="l") == [
        E(
            "l.app.kubernetes.io/name",
            "label-reserved",
            "labels under app.kubernetes.io/ are set by Berth; choose another key",
        )
    ]


def test_at_most_32_labels() -> None:
    labels = {f"l{i}": "x" for i in range(32)}
    assert v.label_errors(labels) == []
    labels["l32"] = "x"
    assert v.label_errors(labels, field="l") == [E("l", "too-many", "at most 32 labels")]


# ------------------------------------------------------------------ checkpoint, gang, shape


def test_a_checkpoint_uri_names_a_known_scheme() -> None:
    assert v.checkpoint_errors("") == []
    for uri in ("s3://bucket/run", "gs://b/r", "nfs://server/export", "pvc://claim/dir"):
        assert v.checkpoint_errors(uri) == []
    schemes = "s3://, gs://, az://, abfs://, abfss://, hdfs://, pvc://, file://, oci://, nfs://"
    long = "s3://" + "b" * 100 + " x"
    assert v.checkpoint_errors(long) == [
        E(
            "checkpoint_uri",
            "checkpoint-uri",
            f"{long[:80]!r} is not a checkpoint location: use one of {schemes}",
        )
    ]
    for uri in ("bucket/run", "http://host/run", "s3://", "s3://a b"):
        assert v.checkpoint_errors(uri, field="c") == [
            E("c", "checkpoint-uri", f"{uri!r} is not a checkpoint location: use one of {schemes}")
        ]


def test_min_nodes_is_for_kind_job_and_between_one_and_nodes() -> None:
    assert v.gang_errors(4, "Job", None, "", "") == []
    assert v.gang_errors(4, "Job", 1, "", "") == []
    assert v.gang_errors(4, "Job", 4, "", "") == []
    message = "must be at least 1 and at most nodes (4)"
    assert v.gang_errors(4, "Job", 0, "", "") == [E("min_nodes", "range", message)]
    assert v.gang_errors(4, "Job", 5, "", "") == [E("min_nodes", "range", message)]
    assert v.gang_errors(4, "JobSet", 2, "", "") == [
        E(
            "min_nodes",
            "job-kind-only",
            "Kueue admits fewer nodes than asked only for kind Job; leave it out",
        )
    ]


def test_one_topology_request_naming_a_label_key() -> None:
    rack = "topology.berth.dev/rack"
    assert v.gang_errors(2, "Job", None, rack, "") == []
    assert v.gang_errors(2, "Job", None, "", rack) == []
    assert v.gang_errors(2, "Job", None, rack, rack) == [
        E("topology_preferred", "one-of", "give topology_required or topology_preferred, not both")
    ]
    assert v.gang_errors(2, "Job", None, "a b", "") == [
        E("topology_required", "label-key", f"'a b': 'a b' {KEY_RULE}")
    ]
    assert v.gang_errors(2, "Job", None, "", "c d") == [
        E("topology_preferred", "label-key", f"'c d': 'c d' {KEY_RULE}")
    ]


def test_a_shape_has_a_known_kind_one_to_1024_nodes_and_no_negative_gpus() -> None:
    assert v.shape_errors(1, 0, "Job", JOB_KINDS) == []
    assert v.shape_errors(1024, 8, "TrainJob", JOB_KINDS) == []
    assert v.shape_errors(0, -1, "MPIJob", JOB_KINDS) == [
        E("kind", "unsupported-value", "use one of: Job, JobSet, PyTorchJob, TrainJob"),
        E("nodes", "minimum", "a job needs at least one node"),
        E("gpus_per_node", "minimum", "must not be negative"),
    ]
    assert v.shape_errors(1025, 0, "Job", JOB_KINDS) == [
        E("nodes", "maximum", "at most 1024 nodes")
    ]


# ------------------------------------------------------------------ the request's own rules

REQUEST: dict[str, Any] = {
    "name": "qwen-sft",
    "image": "reg/trainer:1.0",
    "command": ["python", "train.py"],
}


def test_a_minimal_request_breaks_no_rule_of_its_own() -> None:
    assert own_rules(REQUEST) == []
    assert own_rules(REQUEST | {"env": None, "labels": None, "checkpoint_uri": None}) == []


def test_own_rules_gather_every_broken_rule_in_field_order() -> None:
    errors = own_rules(
        {
            "name": "Bad",
            "image": "",
            "command": [],
            "env": {"1X": "v"},
            "labels": {"berth.dev/x": "v"},
            "checkpoint_uri": "bucket",
            "nodes": 0,
            "gpus_per_node": -1,
            "kind": "JobSet",
            "min_nodes": 1,
        }
    )
    assert [(e.field, e.rule) for e in errors] == [
        ("name", "dns-label"),
        ("image", "required"),
        ("command", "required"),
        ("env.1X", "env-name"),
        ("labels.berth.dev/x", "label-reserved"),
        ("checkpoint_uri", "checkpoint-uri"),
        ("nodes", "minimum"),
        ("gpus_per_node", "minimum"),
        ("min_nodes", "job-kind-only"),
    ]


def test_own_rules_read_the_kind_for_reserved_env_and_gangs() -> None:
    assert own_rules(REQUEST | {"kind": "PyTorchJob", "env": {"RANK": "0"}}) == [
        E(
            "env.RANK",
            "env-reserved",
            "RANK is set by Berth or the PyTorchJob controller (rendezvous or checkpoint "
            "wiring); leave it out",
        )
    ]


def test_own_rules_take_kind_job_when_none_is_given_and_refuse_an_unknown_one() -> None:
    assert own_rules(REQUEST | {"env": {"MASTER_ADDR": "x"}}) == [
        E(
            "env.MASTER_ADDR",
            "env-reserved",
            "MASTER_ADDR is set by Berth or the Job controller (rendezvous or checkpoint "
            "wiring); leave it out",
        )
    ]
    assert own_rules(REQUEST | {"kind": "MPIJob"}) == [
        E("kind", "unsupported-value", "use one of: Job, JobSet, PyTorchJob, TrainJob")
    ]


def test_own_rules_take_one_node_when_none_is_given() -> None:
    assert own_rules(REQUEST | {"min_nodes": 2}) == [
        E("min_nodes", "range", "must be at least 1 and at most nodes (1)")
    ]
    assert own_rules(REQUEST | {"nodes": 3, "min_nodes": 2}) == []


def test_own_rules_pass_the_topology_request_on() -> None:
    assert [e.rule for e in own_rules(REQUEST | {"topology_required": "a b"})] == ["label-key"]
    assert [e.field for e in own_rules(REQUEST | {"topology_preferred": "a b"})] == [
        "topology_preferred"
    ]


# ------------------------------------------------------------------ the queue class's rules

QUEUE = ClusterQueue(name="q")


def klass(**fields: Any) -> QueueClass:
    return QueueClass(name="training-large", **fields)


def test_no_class_asks_for_nothing_and_sets_no_limit() -> None:
    assert class_rules({}, QUEUE, None) == ([], False, None, None)
    assert class_rules({"max_runtime_seconds": 60}, QUEUE, None) == ([], False, 60, None)


def test_spot_only_where_the_class_runs_on_spot() -> None:
    errors, spot, _, _ = class_rules({"spot_allowed": True}, QUEUE, klass())
    assert errors == [
        E(
            "spot_allowed",
            "spot-not-allowed",
            "queue class training-large does not run jobs on spot capacity",
        )
    ]
    assert spot is False
    errors, spot, _, _ = class_rules({"spot_allowed": True}, QUEUE, None)
    assert errors[0].message == "queue class (none) does not run jobs on spot capacity"
    spot_class = klass(spot_allowed=True)
    assert class_rules({"spot_allowed": True, "checkpoint_uri": "s3://b/r"}, QUEUE, spot_class)[
        :2
    ] == ([], True)
    assert class_rules({"checkpoint_uri": "s3://b/r"}, QUEUE, spot_class)[:2] == ([], True)
    assert class_rules({"checkpoint_uri": "s3://b/r", "spot_allowed": False}, QUEUE, spot_class)[
        :2
    ] == ([], False)


def test_a_job_that_may_run_on_spot_needs_a_checkpoint() -> None:
    errors, spot, _, _ = class_rules({}, QUEUE, klass(spot_allowed=True))
    assert (errors, spot) == (
        [
            E(
                "checkpoint_uri",
                "checkpoint-required",
                "a job that may run on spot capacity needs a checkpoint URI; give one, or set "
                "spot_allowed to false",
            )
        ],
        True,
    )
    assert class_rules({"spot_allowed": False}, QUEUE, klass(spot_allowed=True))[0] == []


def test_a_class_that_preempts_at_any_time_needs_a_checkpoint() -> None:
    expected = E(
        "checkpoint_uri",
        "checkpoint-required",
        "queue class training-large may preempt or reclaim its jobs at any time: give a "
        "checkpoint URI (e.g. s3://bucket/run) so work resumes",
    )
    assert class_rules({}, QUEUE, klass(requires_checkpoint=True))[0] == [expected]
    # One error, not two, where the class also runs on spot.
    assert class_rules({}, QUEUE, klass(requires_checkpoint=True, spot_allowed=True))[0] == [
        expected
    ]
    assert (
        class_rules({"checkpoint_uri": "s3://b/r"}, QUEUE, klass(requires_checkpoint=True))[0] == []
    )


@override_settings(BERTH_CHECKPOINT_INTERVAL=900)
def test_the_checkpoint_interval_defaults_only_where_there_is_a_checkpoint() -> None:
    assert class_rules({"checkpoint_uri": "s3://b/r"}, QUEUE, None)[3] == 900
    assert (
        class_rules({"checkpoint_uri": "s3://b/r", "checkpoint_interval_seconds": 60}, QUEUE, None)[
            3
        ]
        == 60
    )
    assert class_rules({"checkpoint_interval_seconds": 60}, QUEUE, None)[3] is None


def test_the_run_time_is_the_classs_limit_at_most() -> None:
    day = klass(max_runtime_seconds=86400)
    assert class_rules({}, QUEUE, day) == ([], False, 86400, None)
    assert class_rules({"max_runtime_seconds": 86400}, QUEUE, day)[:3] == ([], False, 86400)
    assert class_rules({"max_runtime_seconds": 3600}, QUEUE, day)[2] == 3600
    errors, _, runtime, _ = class_rules({"max_runtime_seconds": 86401}, QUEUE, day)
    assert errors == [
        E(
            "max_runtime_seconds",
            "max-runtime-above-limit",
            "1d1s (86401 s) is more than queue class training-large allows (1d)",
        )
    ]
    assert runtime == 86401


def test_retries_are_the_classs_limit_at_most() -> None:
    three = klass(max_retries=3)
    assert class_rules({"retries": 3}, QUEUE, three)[0] == []
    assert class_rules({"retries": None}, QUEUE, klass(max_retries=0))[0] == []
    assert class_rules({"retries": 4}, QUEUE, three)[0] == [
        E(
            "retries",
            "retries-above-limit",
            "4 retries is more than queue class training-large allows (3)",
        )
    ]
    assert class_rules({"retries": 1}, QUEUE, klass(max_retries=0))[0][0].rule == (
        "retries-above-limit"
    )
    assert class_rules({"retries": 9}, QUEUE, None)[0] == []


def test_a_class_that_needs_approval_needs_a_justification() -> None:
    urgent = klass(requires_approval=True)
    expected = [
        E(
            "justification",
            "justification-required",
            "queue class training-large needs an approver's yes: say why this job is urgent",
        )
    ]
    assert class_rules({}, QUEUE, urgent)[0] == expected
    assert class_rules({"justification": "  "}, QUEUE, urgent)[0] == expected
    assert class_rules({"justification": "release blocker"}, QUEUE, urgent)[0] == []
    assert class_rules({}, QUEUE, klass())[0] == []


def test_a_gang_class_admits_no_part_of_a_job() -> None:
    gang = klass(gang_required=True)
    assert class_rules({"min_nodes": 1}, QUEUE, gang)[0] == [
        E(
            "min_nodes",
            "gang-required",
            "queue class training-large starts all of a job's nodes together (a gang): leave "
            "min_nodes out, or use a queue class that admits part of a job",
        )
    ]
    assert class_rules({"min_nodes": None}, QUEUE, gang)[0] == []
    assert class_rules({"min_nodes": 1}, QUEUE, klass())[0] == []
    assert class_rules({"min_nodes": 1}, QUEUE, None)[0] == []


def test_class_rules_gather_every_broken_rule() -> None:
    strict = klass(
        requires_checkpoint=True, requires_approval=True, max_retries=0, max_runtime_seconds=60
    )
    errors = class_rules(
        {"spot_allowed": True, "retries": 1, "max_runtime_seconds": 61, "min_nodes": 1},
        QUEUE,
        strict,
    )[0]
    assert [e.field for e in errors] == [
        "spot_allowed",
        "checkpoint_uri",
        "max_runtime_seconds",
        "retries",
        "justification",
    ]


# ------------------------------------------------------------------ submission's own checks


def test_a_quantity_is_optional_canonical_and_more_than_zero() -> None:
    errors: list[E] = []
    assert _quantity({}, "cpu_per_node", "cpu", errors) is None
    assert _quantity({"cpu_per_node": ""}, "cpu_per_node", "cpu", errors) is None
    assert _quantity({"cpu_per_node": "500m"}, "cpu_per_node", "cpu", errors) == 500
    assert _quantity({"cpu_per_node": 2}, "cpu_per_node", "cpu", errors) == 2000
    assert _quantity({"memory_per_node": "1Gi"}, "memory_per_node", "memory", errors) == 2**30
    assert errors == []
    assert _quantity({"cpu_per_node": "lots"}, "cpu_per_node", "cpu", errors) is None
    assert _quantity({"cpu_per_node": "0"}, "cpu_per_node", "cpu", errors) == 0
    assert _quantity({"memory_per_node": "-1"}, "memory_per_node", "memory", errors) == -1
    assert _quantity({"cpu_per_node": "1m"}, "cpu_per_node", "cpu", errors) == 1
    assert errors == [
        E(
            "cpu_per_node",
            "quantity",
            "'lots' is not a Kubernetes quantity: use a number with an optional suffix (m, k, "
            "M, G, T, P, E, Ki, Mi, Gi, Ti, Pi, Ei), e.g. 64, 500m, 4Ti",
        ),
        E("cpu_per_node", "minimum", "must be more than zero"),
        E("memory_per_node", "minimum", "must be more than zero"),
    ]


def test_a_node_too_big_for_every_usable_flavor_is_refused_naming_each() -> None:
    assert _too_big_for_a_node(16, {}) == []
    assert _too_big_for_a_node(8, {"h100": 8, "a100": 4}) == []
    assert _too_big_for_a_node(9, {"h100": 8, "a100": 4}) == [
        E(
            "gpus_per_node",
            "exceeds-node-size",
            "9 GPUs per node, but the largest node of a100 has 4, h100 has 8; use more nodes "
            "with fewer GPUs each",
        )
    ]


def test_a_render_error_names_its_field_and_placement_is_the_queues() -> None:
    error = _render_error(RenderError("placement", "no-flavor", "no flavor fits"))
    assert isinstance(error, PolicyInvalid)
    assert [e.as_dict() for e in error.errors] == [
        {"field": "queue", "rule": "no-flavor", "message": "no flavor fits"}
    ]
    error = _render_error(RenderError("nodes", "too-many", "too many"))
    assert [e.as_dict() for e in error.errors] == [
        {"field": "nodes", "rule": "too-many", "message": "too many"}
    ]
