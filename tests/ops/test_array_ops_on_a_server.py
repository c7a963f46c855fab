"""The new array, linear-algebra and sparse ops run on a gRPC server: their
attrs (lists, shapes, big ints, type lists) survive the trip in a GraphDef and
the server finds their kernels, gradients included."""

from __future__ import annotations

import numpy as np

import nbdist as nd


def test_new_ops_run_on_a_grpc_server_as_in_process():
    x0 = np.arange(9.0).reshape(3, 3) + 3 * np.eye(3)
    with nd.Graph().as_default():
        x = nd.placeholder(nd.float64, [3, 3])
        sp = nd.SparseTensor([[1, 0], [0, 0]], [1.0, 2.0], [2, 2])
        fetches = {
            "gather_nd": nd.gather_nd(x, [[0, 1], [2, 2]]),
            "svd": nd.svd(x)[0],
            "diag_band": nd.matrix_diag_part(x, k=(-1, 1)),
            "ensure_shape": nd.ensure_shape(x, [3, None]),
            "cross_hashed": nd.sparse.cross_hashed(
                [nd.SparseTensor([[0, 0]], ["a"], [1, 1]), nd.constant([["x"]])],
                10).values,
            "patches": nd.extract_image_patches(nd.reshape(x, [1, 3, 3, 1]),
                                                [1, 2, 2, 1], [1, 1, 1, 1],
                                                [1, 1, 1, 1], "VALID"),
            "einsum": nd.einsum("ij,jk->ik", x, x),
            "reorder": nd.sparse.reorder(sp).values,
        }
        fetches["grad"] = nd.gradients(nd.reduce_sum(fetches["svd"])
                                       + nd.reduce_sum(fetches["einsum"]), [x])[0]
        with nd.Session() as s:
            local = s.run(fetches, {x: x0})
        server = nd.Server.create_local_server()
        try:
            with nd.Session(server.target) as s:
                remote = s.run(fetches, {x: x0})
        finally:
            server.stop()
    for name, value in local.items():
        np.testing.assert_allclose(remote[name], value, err_msg=name)
