"""Control flow as TF1's control_flow_ops tests define it: ``case`` (lists,
dicts, ``exclusive``, no default), ``switch_case`` (out of range -> default
or the last branch), ``cond``'s legacy ``fn1``/``fn2``, singleton unpacking
and strict mode, its TypeErrors, variables created inside a branch or a loop
body (trained by an optimizer), ``group`` per device, ``tuple``,
``with_dependencies`` and ``identity_n``."""

from __future__ import annotations

import collections

import numpy as np
import pytest
from test_gradients import check_gradient

import nbdist as nd
from nbdist import errors
from nbdist.ops import control_flow_ops


def run(fetches, feed=None):
    with nd.Session() as s:
        return s.run(fetches, feed)


# -- case ------------------------------------------------------------------------------
def test_case_first_true_pair_and_default(graph):
    x = nd.placeholder(nd.int32, [])
    y = nd.case([(nd.less(x, 0), lambda: nd.constant(-1)),
                 (nd.equal(x, 0), lambda: nd.constant(0)),
                 (nd.greater(x, 5), lambda: nd.constant(100))],
                default=lambda: nd.constant(1))
    with nd.Session() as s:
        assert [int(s.run(y, {x: v})) for v in (-3, 0, 3, 9)] == [-1, 0, 1, 100]


def test_case_dict_and_ordered_dict(graph):
    x = nd.placeholder(nd.int32, [])
    pairs = collections.OrderedDict([(nd.greater(x, 1), lambda: nd.constant(10)),
                                     (nd.greater(x, 0), lambda: nd.constant(20))])
    first = nd.case(pairs, default=lambda: nd.constant(30))
    plain = nd.case({nd.equal(x, 1): lambda: nd.constant(1),
                     nd.equal(x, 2): lambda: nd.constant(2)},
                    default=lambda: nd.constant(9), exclusive=True)
    with nd.Session() as s:
        assert [int(s.run(first, {x: v})) for v in (2, 1, 0)] == [10, 20, 30]
        assert [int(s.run(plain, {x: v})) for v in (1, 2, 7)] == [1, 2, 9]


def test_case_exclusive_fails_when_two_preds_hold(graph):
    x = nd.placeholder(nd.int32, [])
    y = nd.case([(nd.equal(x, 2), lambda: nd.constant(1)),
                 (nd.greater(x, 1), lambda: nd.constant(2))],
                default=lambda: nd.constant(0), exclusive=True)
    with nd.Session() as s:
        assert int(s.run(y, {x: 5})) == 2
        assert int(s.run(y, {x: 0})) == 0
        with pytest.raises(errors.InvalidArgumentError,
                           match="exclusive=True: more than 1 conditions"):
            s.run(y, {x: 2})


def test_case_without_default_fails_when_nothing_holds(graph):
    x = nd.placeholder(nd.int32, [])
    one = nd.case([(nd.equal(x, 1), lambda: nd.constant(7))])
    two = nd.case([(nd.equal(x, 1), lambda: nd.constant(7)),
                   (nd.equal(x, 2), lambda: nd.constant(8))])
    with nd.Session() as s:
        assert int(s.run(one, {x: 1})) == 7
        assert int(s.run(two, {x: 2})) == 8
        for fetch in (one, two):
            with pytest.raises(errors.InvalidArgumentError,
                               match="None of conditions evaluated as True"):
                s.run(fetch, {x: 3})


def test_case_structures_and_type_errors(graph):
    x = nd.placeholder(nd.float32, [])
    single = nd.case([(x > 0, lambda: [x * 2.0])], default=lambda: [x])
    strict = nd.case([(x > 0, lambda: [x * 2.0])], default=lambda: [x], strict=True)
    assert isinstance(single, nd.Tensor) and isinstance(strict, list)
    assert run([single, strict], {x: 3.0}) == [6.0, [6.0]]
    with pytest.raises(TypeError, match="must be a list, tuple, or dict"):
        nd.case(lambda: x)
    with pytest.raises(TypeError, match="2-tuple"):
        nd.case([x > 0, lambda: x])
    with pytest.raises(TypeError, match="must not be a Python bool|must be a Tensor"):
        nd.case([(True, lambda: x)])


# -- switch_case -----------------------------------------------------------------------
def test_switch_case_out_of_range_takes_the_last_branch_or_default(graph):
    i = nd.placeholder(nd.int32, [])
    last = nd.switch_case(i, [lambda: nd.constant(10), lambda: nd.constant(20),
                              lambda: nd.constant(30)])
    dflt = nd.switch_case(i, {0: lambda: nd.constant(10), 1: lambda: nd.constant(20)},
                          default=lambda: nd.constant(-1))
    with nd.Session() as s:
        assert [int(s.run(last, {i: v})) for v in (-1, 0, 1, 2, 7)] == [
            30, 10, 20, 30, 30]
        assert [int(s.run(dflt, {i: v})) for v in (-1, 0, 1, 2)] == [-1, 10, 20, -1]


def test_switch_case_checks_its_arguments(graph):
    with pytest.raises(TypeError, match="integer Tensor"):
        nd.switch_case(nd.constant(1.0), [lambda: nd.constant(1)])
    with pytest.raises(ValueError, match="contiguous range"):
        nd.switch_case(nd.constant(1), {0: lambda: nd.constant(1),
                                        3: lambda: nd.constant(2)})


def test_switch_case_gradient():
    def build(x):
        return nd.switch_case(nd.constant(1), [lambda: x * 2.0, lambda: nd.sin(x) * x,
                                               lambda: x])

    check_gradient(build, [np.array([0.3, -1.2])])


# -- cond ------------------------------------------------------------------------------
def test_cond_legacy_fn1_fn2_and_strict(graph):
    p = nd.placeholder(nd.bool, [])
    x = nd.constant(2.0)
    legacy = nd.cond(p, fn1=lambda: [x * 3.0], fn2=lambda: [x])
    strict = nd.cond(p, lambda: [x * 3.0], lambda: [x], strict=True)
    assert isinstance(legacy, nd.Tensor) and isinstance(strict, list)
    with nd.Session() as s:
        assert s.run(legacy, {p: True}) == 6.0 and s.run(legacy, {p: False}) == 2.0
        assert s.run(strict, {p: True}) == [6.0]
    with pytest.raises(TypeError, match="true_fn and fn1"):
        nd.cond(p, lambda: x, lambda: x, fn1=lambda: x)


def test_cond_type_errors_as_tf(graph):
    x = nd.constant(1.0)
    with pytest.raises(TypeError, match="pred must not be a Python bool"):
        nd.cond(True, lambda: x, lambda: x)
    with pytest.raises(TypeError, match="same type"):
        nd.cond(nd.constant(True), lambda: x, lambda: 3)
    with pytest.raises(TypeError, match="same type"):
        nd.cond(nd.constant(True), lambda: x, lambda: nd.constant(1))
    # A constant pred is an ordinary (bool tensor) pred.
    assert run(nd.cond(nd.constant(False), lambda: x, lambda: x * 5.0)) == 5.0


# -- variables created inside control flow ---------------------------------------------
def test_variables_created_in_branches_are_initialized_and_trained(graph):
    p = nd.placeholder(nd.bool, [])
    x = nd.constant([1.0, 2.0])

    def with_get_variable():
        w = nd.get_variable("w", [2], initializer=nd.ones_initializer())
        return x * w

    def with_variable():
        v = nd.Variable(nd.zeros([2]) + 5.0, name="v")
        return x + v

    y = nd.cond(p, with_get_variable, with_variable)
    names = sorted(v.op.name for v in nd.global_variables())
    assert names[1] == "w" and names[0].endswith("v") and len(names) == 2
    assert len(nd.trainable_variables()) == 2
    train = nd.train.GradientDescentOptimizer(0.1).minimize(nd.reduce_sum(y * y))
    with nd.Session() as s:
        s.run(nd.global_variables_initializer())
        np.testing.assert_allclose(s.run(y, {p: True}), [1.0, 2.0])
        np.testing.assert_allclose(s.run(y, {p: False}), [6.0, 7.0])
        s.run(train, {p: True})
        # d/dw sum((x w)^2) = 2 x^2 w
        np.testing.assert_allclose(s.run(y, {p: True}),
                                   [1.0 * (1 - 0.2), 2.0 * (1 - 0.8)], rtol=1e-6)


def test_variable_created_in_a_loop_body_is_created_once(graph):
    def body(i, acc):
        c = nd.get_variable("c", [], initializer=nd.constant_initializer(3.0))
        return i + 1, acc + c * nd.cast(i, nd.float32)

    _, acc = nd.while_loop(lambda i, a: i < 4, body, [0, 0.0])
    assert [v.op.name for v in nd.global_variables()] == ["c"]
    with nd.Session() as s:
        s.run(nd.global_variables_initializer())
        assert s.run(acc) == 3.0 * (0 + 1 + 2 + 3)


# -- group, tuple, with_dependencies, identity_n ---------------------------------------
def test_group_places_its_noop_with_its_inputs(graph):
    with nd.device("/job:ps/task:0"):
        a = nd.constant(1.0)
        a2 = a + 1.0
    with nd.device("/job:worker/task:1"):
        b = nd.constant(2.0)
    with nd.device("/job:worker/task:0"):
        same = nd.group(a, a2)
        mixed = nd.group(a, b.op, a2)
    assert same.device == "/job:ps/task:0"
    assert {op.name for op in same.control_inputs} == {a.op.name, a2.op.name}
    per_device = mixed.control_inputs
    assert mixed.device == "/job:worker/task:0"
    assert [op.type for op in per_device] == ["NoOp", "NoOp"]
    assert sorted(op.device for op in per_device) == ["/job:ps/task:0",
                                                      "/job:worker/task:1"]
    ps_noop = next(op for op in per_device if op.device == "/job:ps/task:0")
    assert sorted(op.name for op in ps_noop.control_inputs) == sorted(
        [a.op.name, a2.op.name])


def test_group_tuple_with_dependencies_identity_n_run(graph):
    v = nd.Variable(0.0)
    inc = v.assign_add(1.0)
    both = nd.group([inc], {"b": (v.assign_add(2.0).op,)})
    out = control_flow_ops.with_dependencies([both], nd.constant(5.0))
    t = nd.tuple([nd.constant(1.0), nd.constant(2.0)])
    ids = nd.identity_n([nd.constant([1, 2]), nd.constant("s")])
    assert [x.dtype for x in ids] == [nd.int32, nd.string]
    assert control_flow_ops.no_op().type == "NoOp"
    with nd.Session() as s:
        s.run(v.initializer)
        assert s.run(out) == 5.0 and s.run(v) == 3.0
        assert s.run(t) == [1.0, 2.0]
        got = s.run(ids)
        assert got[0].tolist() == [1, 2] and got[1] == b"s"


def test_identity_n_gradient():
    check_gradient(lambda x, y: nd.identity_n([x * 2.0, nd.sin(y)])[0] +
                   nd.identity_n([x, y])[1],
                   [np.array([0.5, 1.0]), np.array([-0.3, 2.0])])
