"""ClusterSpec; expected values from TF's server_lib_test.py and
tools/dist_test/server/parse_cluster_spec_test.py."""

from __future__ import annotations

import pytest
from google.protobuf import text_format

from nbdist.proto import cluster_pb2, server_def_pb2
from nbdist.runtime.cluster_spec import ClusterSpec, task_device

# From the original "Distributed TensorFlow" how-to (grpc_tensorflow_server).
DOCS_SPEC = (
    "ps|ps0.example.com:2222,worker|worker0.example.com:2222;worker1.example.com:2222"
)


def _proto(text: str) -> cluster_pb2.ClusterDef:
    return text_format.Parse(text, cluster_pb2.ClusterDef())


def _assert_round_trips(cluster_spec: ClusterSpec, expected_text: str) -> None:
    expected = _proto(expected_text)
    assert cluster_spec.as_cluster_def() == expected
    assert ClusterSpec(cluster_spec).as_cluster_def() == expected
    assert ClusterSpec(cluster_spec.as_cluster_def()).as_cluster_def() == expected
    assert ClusterSpec(cluster_spec.as_dict()).as_cluster_def() == expected


TWO_JOBS = """
    job { name: 'ps' tasks { key: 0 value: 'ps0:2222' }
                     tasks { key: 1 value: 'ps1:2222' } }
    job { name: 'worker' tasks { key: 0 value: 'worker0:2222' }
                         tasks { key: 1 value: 'worker1:2222' }
                         tasks { key: 2 value: 'worker2:2222' } }
"""


def test_proto_dict_def_equivalences():
    cluster_spec = ClusterSpec(
        {
            "ps": ["ps0:2222", "ps1:2222"],
            "worker": ["worker0:2222", "worker1:2222", "worker2:2222"],
        }
    )
    _assert_round_trips(cluster_spec, TWO_JOBS)


def test_cluster_def_is_sorted_by_job_name():
    cluster_spec = ClusterSpec(
        {
            "worker": ["worker0:2222", "worker1:2222", "worker2:2222"],
            "ps": ["ps0:2222", "ps1:2222"],
        }
    )
    assert cluster_spec.jobs == ["worker", "ps"]  # dict order
    _assert_round_trips(cluster_spec, TWO_JOBS)
    assert ClusterSpec(cluster_spec).jobs == ["ps", "worker"]


def test_zero_worker_job():
    cluster_spec = ClusterSpec({"ps": ["ps0:2222", "ps1:2222"], "worker": []})
    _assert_round_trips(
        cluster_spec,
        """
        job { name: 'ps' tasks { key: 0 value: 'ps0:2222' }
                         tasks { key: 1 value: 'ps1:2222' } }
        job { name: 'worker' }
        """,
    )
    assert cluster_spec.as_dict() == {"ps": ["ps0:2222", "ps1:2222"], "worker": {}}
    assert cluster_spec.num_tasks("worker") == 0
    assert cluster_spec.job_tasks("worker") == []


def test_dense_and_sparse_jobs_round_trip():
    cluster_spec = ClusterSpec(
        {
            "ps": ["ps0:2222", "ps1:2222"],
            "worker": {0: "worker0:2222", 2: "worker2:2222"},
        }
    )
    _assert_round_trips(
        cluster_spec,
        """
        job { name: 'ps' tasks { key: 0 value: 'ps0:2222' }
                         tasks { key: 1 value: 'ps1:2222' } }
        job { name: 'worker' tasks { key: 0 value: 'worker0:2222' }
                             tasks { key: 2 value: 'worker2:2222' } }
        """,
    )


def test_server_def_embeds_cluster_def():
    cluster_def = ClusterSpec({"local": ["localhost:2222"]}).as_cluster_def()
    server_def = server_def_pb2.ServerDef(
        cluster=cluster_def, job_name="local", task_index=0, protocol="grpc"
    )
    assert server_def.cluster.job[0].name == "local"
    assert dict(server_def.cluster.job[0].tasks) == {0: "localhost:2222"}
    assert ClusterSpec(server_def.cluster).as_cluster_def() == cluster_def


def test_cluster_def_input_is_copied():
    cluster_def = ClusterSpec({"local": ["localhost:2222"]}).as_cluster_def()
    cluster_spec = ClusterSpec(cluster_def)
    cluster_def.job[0].tasks[1] = "localhost:2223"
    assert cluster_spec.num_tasks("local") == 1


def test_accessors():
    original = {
        "ps": ["ps0:2222", "ps1:2222"],
        "worker": ["worker0:2222", "worker1:2222", "worker2:2222"],
        "sparse": {0: "sparse0:2222", 3: "sparse3:2222"},
    }
    cluster_spec = ClusterSpec(original)
    assert cluster_spec.as_dict() == original
    assert cluster_spec.jobs == ["ps", "worker", "sparse"]

    assert cluster_spec.num_tasks("ps") == 2
    assert cluster_spec.num_tasks("worker") == 3
    assert cluster_spec.num_tasks("sparse") == 2

    assert cluster_spec.task_address("ps", 0) == "ps0:2222"
    assert cluster_spec.task_address("sparse", 0) == "sparse0:2222"

    assert cluster_spec.task_indices("ps") == [0, 1]
    assert cluster_spec.task_indices("worker") == [0, 1, 2]
    assert cluster_spec.task_indices("sparse") == [0, 3]

    assert cluster_spec.job_tasks("ps") == ["ps0:2222", "ps1:2222"]
    assert cluster_spec.job_tasks("worker") == [
        "worker0:2222",
        "worker1:2222",
        "worker2:2222",
    ]
    assert cluster_spec.job_tasks("sparse") == [
        "sparse0:2222",
        None,
        None,
        "sparse3:2222",
    ]


@pytest.mark.parametrize(
    "method", ["num_tasks", "task_indices", "job_tasks", "task_address"]
)
def test_unknown_job(method):
    cluster_spec = ClusterSpec({"ps": ["ps0:2222"]})
    args = ("unknown", 0) if method == "task_address" else ("unknown",)
    with pytest.raises(ValueError, match=r"^No such job in cluster: 'unknown'$"):
        getattr(cluster_spec, method)(*args)


def test_unknown_task():
    cluster_spec = ClusterSpec({"sparse": {0: "a:1", 3: "b:1"}})
    with pytest.raises(
        ValueError, match=r"No task with index 2 in job 'sparse' .*\[0, 3\]"
    ):
        cluster_spec.task_address("sparse", 2)


def test_string_conversion():
    cluster_spec = ClusterSpec(
        {"ps": ["ps0:1111"], "worker": ["worker0:3333", "worker1:4444"]}
    )
    expected = (
        "ClusterSpec({'ps': ['ps0:1111'], 'worker': ['worker0:3333', 'worker1:4444']})"
    )
    assert str(cluster_spec) == expected
    assert repr(ClusterSpec({"w": {1: "a:1"}})) == "ClusterSpec({'w': {1: 'a:1'}})"


def test_truthiness():
    assert not ClusterSpec({})
    assert ClusterSpec({"job": ["host:port"]})
    assert ClusterSpec({"job": []})  # a job with no tasks is still a job


def test_eq():
    assert ClusterSpec({}) == ClusterSpec({})
    assert ClusterSpec({"job": ["host:2222"]}) == ClusterSpec({"job": ["host:2222"]})
    assert ClusterSpec({"job": {0: "host:2222"}}) == ClusterSpec({"job": ["host:2222"]})
    # As TF, a plain dict compares in the internal {job: {index: address}} form.
    assert ClusterSpec({"job": ["host:2222"]}) == {"job": {0: "host:2222"}}
    assert ClusterSpec({"job": ["host:2222"]}) != {"job": ["host:2222"]}


def test_ne():
    assert ClusterSpec({}) != ClusterSpec({"job": ["host:2223"]})
    assert ClusterSpec({"job1": ["host:2222"]}) != ClusterSpec({"job2": ["host:2222"]})
    assert ClusterSpec({"job": ["host:2222"]}) != ClusterSpec({"job": ["host:2223"]})
    assert ClusterSpec({"job": ["host:2222", "host:2223"]}) != ClusterSpec(
        {"job": ["host:2223", "host:2222"]}
    )


def test_unhashable_like_tf():
    with pytest.raises(TypeError):
        hash(ClusterSpec({}))


def test_sparse_dict_keys_may_be_strings():
    # JSON (TF_CONFIG) keys are strings; TF converts them with int().
    cluster_spec = ClusterSpec({"worker": {"1": "worker1:2222"}})
    assert cluster_spec.task_indices("worker") == [1]
    assert cluster_spec.as_dict() == {"worker": {1: "worker1:2222"}}


def test_bytes_are_decoded():
    cluster_spec = ClusterSpec({b"ps": [b"ps0:2222"]})
    assert cluster_spec.as_dict() == {"ps": ["ps0:2222"]}


@pytest.mark.parametrize(
    ("cluster", "error", "match"),
    [
        ({"ps": "ps0:2222"}, TypeError, "tasks for job 'ps' must be a list or a dict"),
        ({"ps": None}, TypeError, "tasks for job 'ps'"),
        ({"ps": [3]}, TypeError, r"Task address \(job 'ps', task 0\) 3 must be bytes"),
        ({1: ["a:1"]}, TypeError, "Job name 1 must be bytes or unicode"),
        ({"ps": {"x": "a:1"}}, TypeError, "Task index 'x' in job 'ps'"),
        ({"ps": {-1: "a:1"}}, ValueError, "Task index -1 in job 'ps'"),
        (["ps|a:1"], TypeError, "must be a dictionary"),
        (None, TypeError, "must be a dictionary"),
    ],
)
def test_bad_input(cluster, error, match):
    with pytest.raises(error, match=match):
        ClusterSpec(cluster)


# -- from_string (grpc_tensorflow_server --cluster_spec) ------------------------


def test_from_string_docs_example():
    cluster_spec = ClusterSpec.from_string(DOCS_SPEC)
    expected = {
        "ps": ["ps0.example.com:2222"],
        "worker": ["worker0.example.com:2222", "worker1.example.com:2222"],
    }
    assert cluster_spec == ClusterSpec(expected)
    assert cluster_spec.as_dict() == expected
    assert cluster_spec.task_address("worker", 1) == "worker1.example.com:2222"
    _assert_round_trips(
        cluster_spec,
        """
        job { name: 'ps' tasks { key: 0 value: 'ps0.example.com:2222' } }
        job { name: 'worker' tasks { key: 0 value: 'worker0.example.com:2222' }
                             tasks { key: 1 value: 'worker1.example.com:2222' } }
        """,
    )


def test_from_string_multi_jobs_keeps_order():
    cluster_spec = ClusterSpec.from_string(
        "worker|worker0:2220;worker1:2221;worker2:2222,ps|ps0:3220;ps1:3221"
    )
    assert cluster_spec.jobs == ["worker", "ps"]
    assert cluster_spec.job_tasks("worker") == [
        "worker0:2220",
        "worker1:2221",
        "worker2:2222",
    ]
    assert cluster_spec.job_tasks("ps") == ["ps0:3220", "ps1:3221"]
    assert cluster_spec == ClusterSpec(
        {
            "ps": ["ps0:3220", "ps1:3221"],
            "worker": ["worker0:2220", "worker1:2221", "worker2:2222"],
        }
    )


def test_from_string_local_example():
    assert ClusterSpec.from_string("local|localhost:2222;localhost:2223").as_dict() == {
        "local": ["localhost:2222", "localhost:2223"]
    }
    assert ClusterSpec.from_string("ps|h:1;h:2,worker|h:3").as_dict() == {
        "ps": ["h:1", "h:2"],
        "worker": ["h:3"],
    }


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("", "Empty cluster_spec string"),
        ("   ", "Empty cluster_spec string"),
        (
            "worker|worker0:2220,worker1:2221",
            r"Not exactly one instance of '\|'.*'worker1:2221'",
        ),
        ("worker|worker0:2220;ps|ps0:3220", r"Not exactly one instance of '\|'"),
        ("worker|worker0:2220,|ps0:3220", "Empty job_name in cluster_spec"),
        ("worker|worker0:2220,ps|", "Empty task string at position 0 in job 'ps'"),
        ("worker|a:1;;b:2", "Empty task string at position 1 in job 'worker'"),
        ("worker|a:1,worker|b:2", "Job 'worker' appears more than once"),
    ],
)
def test_from_string_malformed(text, match):
    with pytest.raises(ValueError, match=match):
        ClusterSpec.from_string(text)


def test_from_string_requires_a_string():
    with pytest.raises(TypeError, match="must be a string"):
        ClusterSpec.from_string({"ps": ["a:1"]})


# -- task names -----------------------------------------------------------------


def test_task_device():
    assert task_device("worker", 1) == "/job:worker/replica:0/task:1"
    assert task_device("ps", 0) == "/job:ps/replica:0/task:0"


def test_task_names_sorted_by_job_then_index():
    cluster_spec = ClusterSpec(
        {"worker": {2: "w2:1", 0: "w0:1"}, "ps": ["p0:1"], "chief": ["c0:1"]}
    )
    assert cluster_spec.task_names() == [
        "/job:chief/replica:0/task:0",
        "/job:ps/replica:0/task:0",
        "/job:worker/replica:0/task:0",
        "/job:worker/replica:0/task:2",
    ]
    assert ClusterSpec({}).task_names() == []
