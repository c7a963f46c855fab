"""DeviceSpec, canonical_name and merge_device; expected values from TF's tests
(device_spec_test.py, device_test.py)."""

from __future__ import annotations

import types

import pytest

from nbdist.framework.device import (
    DeviceSpec,
    MergeDevice,
    canonical_name,
    check_valid,
    merge_device,
)


def test_empty():
    d = DeviceSpec()
    assert d.to_string() == ""
    assert d.parse_from_string("") is d
    assert d.to_string() == ""
    assert DeviceSpec.from_string(None).to_string() == ""


def test_constructor():
    d = DeviceSpec(job="j", replica=0, task=1, device_type="CPU", device_index=2)
    assert (d.job, d.replica, d.task, d.device_type, d.device_index) == (
        "j",
        0,
        1,
        "CPU",
        2,
    )
    assert d.to_string() == "/job:j/replica:0/task:1/device:CPU:2"
    assert DeviceSpec(device_type="GPU", device_index=0).to_string() == "/device:GPU:0"


def test_to_string_legacy_mutation():
    d = DeviceSpec()
    d.job = "foo"
    assert d.to_string() == "/job:foo"
    d.task = 3
    assert d.to_string() == "/job:foo/task:3"
    d.device_type = "CPU"
    d.device_index = 0
    assert d.to_string() == "/job:foo/task:3/device:CPU:0"
    d.task = None
    d.replica = 12
    assert d.to_string() == "/job:foo/replica:12/device:CPU:0"
    d.device_type = "GPU"
    d.device_index = 2
    assert d.to_string() == "/job:foo/replica:12/device:GPU:2"
    d.device_type = None
    d.device_index = None
    assert d.to_string() == "/job:foo/replica:12"


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        ({"job": "foo"}, "/job:foo"),
        ({"job": "foo", "task": 3}, "/job:foo/task:3"),
        (
            {"job": "foo", "task": 3, "device_type": "cpu", "device_index": 0},
            "/job:foo/task:3/device:CPU:0",
        ),
        (
            {"job": "foo", "replica": 12, "device_type": "gpu", "device_index": 2},
            "/job:foo/replica:12/device:GPU:2",
        ),
        ({"job": "foo", "replica": 12}, "/job:foo/replica:12"),
        (
            {"job": "foo", "replica": 12, "task": 3, "device_type": "GPU"},
            "/job:foo/replica:12/task:3/device:GPU:*",
        ),
        ({"replica": "1", "task": "2"}, "/replica:1/task:2"),
    ],
)
def test_to_string(kwargs, expected):
    assert DeviceSpec(**kwargs).to_string() == expected


def test_replace():
    d = DeviceSpec().replace(job="foo")
    assert d.to_string() == "/job:foo"
    d = d.replace(task=3)
    assert d.to_string() == "/job:foo/task:3"
    d = d.replace(device_type="CPU", device_index=0)
    assert d.to_string() == "/job:foo/task:3/device:CPU:0"
    d = d.replace(task=None, replica=12)
    assert d.to_string() == "/job:foo/replica:12/device:CPU:0"
    d = d.replace(device_type=None, device_index=None)
    assert d.to_string() == "/job:foo/replica:12"


@pytest.mark.parametrize(
    ("spec", "fields", "canonical"),
    [
        ("/job:ps/task:0", ("ps", None, 0, None, None), "/job:ps/task:0"),
        (
            "/job:worker/replica:0/task:1/device:CPU:0",
            ("worker", 0, 1, "CPU", 0),
            "/job:worker/replica:0/task:1/device:CPU:0",
        ),
        ("/cpu:0", (None, None, None, "CPU", 0), "/device:CPU:0"),
        ("/CPU:0", (None, None, None, "CPU", 0), "/device:CPU:0"),
        ("CPU:0", (None, None, None, "CPU", 0), "/device:CPU:0"),
        ("cpu", (None, None, None, "CPU", None), "/device:CPU:*"),
        ("/cpu:*", (None, None, None, "CPU", None), "/device:CPU:*"),
        ("/device:CPU:1", (None, None, None, "CPU", 1), "/device:CPU:1"),
        ("/device:cpu:1", (None, None, None, "CPU", 1), "/device:CPU:1"),
        ("/device:CPU:*", (None, None, None, "CPU", None), "/device:CPU:*"),
        ("/gpu:3", (None, None, None, "GPU", 3), "/device:GPU:3"),
        ("/job:foo/replica:0", ("foo", 0, None, None, None), "/job:foo/replica:0"),
        (
            "/replica:1/task:0/cpu:0",
            (None, 1, 0, "CPU", 0),
            "/replica:1/task:0/device:CPU:0",
        ),
        (
            "/job:muu/device:GPU:2",
            ("muu", None, None, "GPU", 2),
            "/job:muu/device:GPU:2",
        ),
        (
            "/job:muu/task:1/device:MyFunnyDevice:2",
            ("muu", None, 1, "MyFunnyDevice", 2),
            "/job:muu/task:1/device:MyFunnyDevice:2",
        ),
        ("", (None, None, None, None, None), ""),
        ("//job:a//", ("a", None, None, None, None), "/job:a"),
    ],
)
def test_from_string(spec, fields, canonical):
    d = DeviceSpec.from_string(spec)
    assert (d.job, d.replica, d.task, d.device_type, d.device_index) == fields
    assert d.to_string() == canonical
    assert DeviceSpec.from_string(canonical) == d


def test_parse_from_string_replaces_every_field():
    d = DeviceSpec.from_string("/job:foo/replica:0")
    assert d.parse_from_string("/task:3") is d
    assert d.to_string() == "/task:3"


@pytest.mark.parametrize(
    ("spec", "match"),
    [
        ("/job:j/replica:foo", r"invalid literal for int.*'foo'.*/job:j/replica:foo"),
        ("/job:j/task:bar", r"invalid literal for int.*'bar'.*task index"),
        ("/cpu:x", r"invalid literal for int.*'x'.*device index"),
        ("/device:CPU:x", r"invalid literal for int: /device:CPU:x"),
        ("/device:CPU:-1", r"invalid literal for int"),
        ("/barcpugpu:muu/baz:2", r"Unknown attribute 'barcpugpu'.*expected"),
        ("/device:CPU", r"Unknown attribute 'device'"),
        ("/job:ps:1", r"Unknown attribute 'job' .*'/job:ps:1'"),
        ("/cpu:0/device:GPU:2", "Multiple device types are not allowed"),
        ("/job:muu/device:GPU:2/cpu:0", "Multiple device types are not allowed"),
    ],
)
def test_malformed_specs(spec, match):
    with pytest.raises(ValueError, match=match):
        check_valid(spec)


def test_non_string_spec_is_a_type_error():
    with pytest.raises(TypeError, match="must be a string"):
        DeviceSpec.from_string(3)


def test_constructor_rejects_non_integer_task():
    with pytest.raises(ValueError, match="task index 'x'"):
        DeviceSpec(task="x")


def test_merge_from():
    d = DeviceSpec.from_string("/job:foo/replica:0")
    d.merge_from(DeviceSpec.from_string("/task:1/device:GPU:2"))
    assert d.to_string() == "/job:foo/replica:0/task:1/device:GPU:2"

    d = DeviceSpec()
    d.merge_from(DeviceSpec.from_string("/task:1/cpu:0"))
    assert d.to_string() == "/task:1/device:CPU:0"
    d.merge_from(DeviceSpec.from_string("/job:boo/device:GPU:0"))
    assert d.to_string() == "/job:boo/task:1/device:GPU:0"
    d.merge_from(DeviceSpec.from_string("/job:muu/cpu:2"))
    assert d.to_string() == "/job:muu/task:1/device:CPU:2"
    d.merge_from(DeviceSpec.from_string("/job:muu/device:MyFunnyDevice:2"))
    assert d.to_string() == "/job:muu/task:1/device:MyFunnyDevice:2"


def test_make_merged_spec_returns_new_spec():
    d = DeviceSpec.from_string("/job:foo/replica:0")
    merged = d.make_merged_spec(DeviceSpec.from_string("/task:1/device:GPU:2"))
    assert merged.to_string() == "/job:foo/replica:0/task:1/device:GPU:2"
    assert d.to_string() == "/job:foo/replica:0"
    d = DeviceSpec()
    for spec, expected in [
        ("/task:1/cpu:0", "/task:1/device:CPU:0"),
        ("/job:boo/device:GPU:0", "/job:boo/task:1/device:GPU:0"),
        ("/job:muu/cpu:2", "/job:muu/task:1/device:CPU:2"),
    ]:
        d = d.make_merged_spec(DeviceSpec.from_string(spec))
        assert d.to_string() == expected


def test_equality_and_hash():
    a = DeviceSpec.from_string("/job:ps/task:0/cpu:0")
    b = DeviceSpec(job="ps", task=0, device_type="CPU", device_index=0)
    assert a == b
    assert hash(a) == hash(b)
    assert len({a, b}) == 1
    assert a != DeviceSpec.from_string("/job:ps/task:1/cpu:0")
    assert a != "/job:ps/task:0/device:CPU:0"  # a string is not a DeviceSpec
    assert repr(a) == "DeviceSpec.from_string('/job:ps/task:0/device:CPU:0')"


def test_is_full_and_task_name():
    assert DeviceSpec.from_string("/job:w/replica:0/task:1/device:CPU:0").is_full()
    assert not DeviceSpec.from_string("/job:w/task:1/device:CPU:0").is_full()
    assert not DeviceSpec.from_string("/job:w/replica:0/task:1/device:CPU:*").is_full()
    assert DeviceSpec.from_string("/job:w/task:1/cpu:0").task_name() == (
        "/job:w/replica:0/task:1"
    )
    assert DeviceSpec.from_string("/job:w/replica:2/task:1").task_name() == (
        "/job:w/replica:2/task:1"
    )
    with pytest.raises(ValueError, match="does not name a task"):
        DeviceSpec.from_string("/job:w").task_name()
    with pytest.raises(ValueError, match="does not name a task"):
        DeviceSpec.from_string("/task:0/cpu:0").task_name()


@pytest.mark.parametrize(
    ("name", "canonical"),
    [
        ("/job:foo/replica:0", "/job:foo/replica:0"),
        ("/replica:0/job:foo", "/job:foo/replica:0"),
        ("/job:foo/replica:0/task:0", "/job:foo/replica:0/task:0"),
        ("/job:foo/task:0/replica:0", "/job:foo/replica:0/task:0"),
        ("/device:CPU:0", "/device:CPU:0"),
        ("/device:GPU:2", "/device:GPU:2"),
        (
            "/job:foo/replica:0/task:0/device:GPU:0",
            "/job:foo/replica:0/task:0/device:GPU:0",
        ),
        (
            "/device:GPU:0/task:0/replica:0/job:foo",
            "/job:foo/replica:0/task:0/device:GPU:0",
        ),
        ("/cpu:0", "/device:CPU:0"),
        (None, ""),
        (DeviceSpec(job="a", task=1), "/job:a/task:1"),
    ],
)
def test_canonical_name(name, canonical):
    assert canonical_name(name) == canonical


def _apply_scopes(scopes, device=""):
    """Applies device functions innermost first, as Graph._apply_device_functions."""
    node = types.SimpleNamespace(device=device)
    for fn in reversed(scopes):
        node.device = fn(node).to_string()
    return node.device


def test_merge_device_nested_scopes():
    # TF device_test.testMerge: inner fields override outer ones.
    scopes = [merge_device("/device:GPU:0")]
    assert _apply_scopes(scopes) == "/device:GPU:0"
    scopes.append(merge_device("/job:worker"))
    assert _apply_scopes(scopes) == "/job:worker/device:GPU:0"
    scopes.append(merge_device("/device:CPU:0"))
    assert _apply_scopes(scopes) == "/job:worker/device:CPU:0"
    scopes.append(merge_device("/job:ps"))
    assert _apply_scopes(scopes) == "/job:ps/device:CPU:0"


def test_merge_device_op_device_takes_precedence():
    fn = merge_device("/job:worker/task:0/device:CPU:0")
    assert isinstance(fn, MergeDevice)
    assert fn("/task:1").to_string() == "/job:worker/task:1/device:CPU:0"
    assert fn(types.SimpleNamespace(device=None)).to_string() == (
        "/job:worker/task:0/device:CPU:0"
    )
    assert fn(DeviceSpec(job="ps")).to_string() == "/job:ps/task:0/device:CPU:0"
    assert fn.string_merge("/cpu:1") == "/job:worker/task:0/device:CPU:1"
    assert not fn.is_null_merge
    assert merge_device("").is_null_merge
    assert merge_device(None)("/job:a").to_string() == "/job:a"


def test_merge_device_snapshots_a_mutable_spec():
    spec = DeviceSpec(job="ps")
    fn = merge_device(spec)
    spec.job = "worker"
    assert fn("").to_string() == "/job:ps"


def test_merge_device_rejects_malformed_spec():
    with pytest.raises(ValueError, match="Unknown attribute 'jb'"):
        merge_device("/jb:ps")
