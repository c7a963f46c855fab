"""ensure_shape, shape_n, parallel_stack, guarantee_const, bitcast and the
``nd.manip`` aliases."""

from __future__ import annotations

import numpy as np
import pytest
from op_checks import dynamic, run

import nbdist as nd

pytestmark = pytest.mark.usefixtures("graph")


def test_ensure_shape_sets_the_static_shape_and_checks_at_run_time():
    y = nd.ensure_shape(dynamic([[1.0, 2.0]]), [None, 2])
    assert y.shape.as_list() == [None, 2]
    assert run(y).tolist() == [[1.0, 2.0]]
    with pytest.raises(nd.errors.InvalidArgumentError,
                       match=r"is not compatible with expected shape \[3\]"):
        run(nd.ensure_shape(dynamic([1.0, 2.0]), [3]))
    with pytest.raises(ValueError, match="is not compatible with expected shape"):
        nd.ensure_shape(nd.constant([1.0, 2.0]), [3])


def test_shape_n_parallel_stack_guarantee_const():
    shapes = run(nd.shape_n([np.ones((2, 3)), np.ones(4)]))
    assert [s.tolist() for s in shapes] == [[2, 3], [4]]
    assert run(nd.parallel_stack([[1, 2], [3, 4]])).tolist() == [[1, 2], [3, 4]]
    assert run(nd.guarantee_const([1.0])).tolist() == [1.0]


def test_bitcast_reinterprets_bytes_as_numpy_view():
    x = np.array([1.0, -2.5], np.float32)
    got = run(nd.bitcast(x, nd.uint8))
    np.testing.assert_array_equal(got, x.view(np.uint8).reshape(2, 4))
    back = nd.bitcast(got, nd.float32)
    assert back.shape.as_list() == [2]
    np.testing.assert_array_equal(run(back), x)


def test_manip_names():
    assert nd.manip.roll is nd.roll and nd.manip.gather_nd is nd.gather_nd
    assert sorted(nd.manip.__all__) == ["batch_to_space_nd", "gather_nd", "reshape",
                                        "reverse", "roll", "scatter_nd",
                                        "space_to_batch_nd", "tile"]
