"""The classic MNIST conv net with nd.layers (and with slim), trained
between-graph on LocalCluster(ps=1, workers=2): its variables live on the ps,
and the loss falls on synthetic data."""

from __future__ import annotations

import importlib.util
import re
import sys

import pytest
from helpers import ROOT
from test_examples import losses, run_example

import nbdist as nd

EXAMPLES = ROOT / "examples"


def _load(name):
    sys.path.insert(0, str(EXAMPLES))
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _flags(module):
    return module.parse(["--conv1=4", "--conv2=8", "--hidden=16"])


def test_layers_net_graph_variables_on_ps():
    module = _load("mnist_conv_layers")
    cluster = nd.train.ClusterSpec({"ps": ["localhost:1"],
                                    "worker": ["localhost:2", "localhost:3"]})
    graph, _ = module.build(1, cluster, _flags(module))
    with graph.as_default():
        variables = {v.op.name: v for v in nd.trainable_variables()}
    assert list(variables) == [
        "conv2d/kernel", "conv2d/bias", "conv2d_1/kernel", "conv2d_1/bias",
        "dense/kernel", "dense/bias", "dense_1/kernel", "dense_1/bias"]
    assert variables["conv2d/kernel"].shape.as_list() == [5, 5, 1, 4]
    assert variables["dense/kernel"].shape.as_list() == [7 * 7 * 8, 16]
    assert all(v.device == "/job:ps/task:0" for v in variables.values())
    assert graph.get_operation_by_name("conv2d/Conv2D").device == \
        "/job:worker/task:1"


def test_slim_net_graph_variables():
    module = _load("mnist_conv_slim")
    cluster = nd.train.ClusterSpec({"ps": ["localhost:1"], "worker": ["localhost:2"]})
    graph, _ = module.build(0, cluster, _flags(module))
    with graph.as_default():
        names = [v.op.name for v in nd.model_variables()]
        assert len(nd.get_collection(nd.GraphKeys.REGULARIZATION_LOSSES)) == 4
    assert names == ["conv1/weights", "conv1/biases", "conv2/weights",
                     "conv2/biases", "fc3/weights", "fc3/biases", "fc4/weights",
                     "fc4/biases"]


def _check_training(out):
    for i in range(2):  # both workers trained
        assert len(losses(out, f"worker {i} ")) >= 1, out
    ls = losses(out, "worker ")
    # The two first steps start near ln(10) = 2.30; later ones are lower.
    assert min(ls[2:]) < min(ls[:2]) - 0.3, out
    assert re.search(r"^accuracy (\S+)$", out, re.MULTILINE), out


@pytest.mark.slow
@pytest.mark.timeout(120)
@pytest.mark.parametrize("script", ["mnist_conv_layers.py", "mnist_conv_slim.py"])
def test_mnist_conv_trains_across_two_workers(script):
    out = run_example(script, "--local_cluster", "--num_workers=2",
                      "--train_steps=36", "--batch_size=16", "--log_every=6",
                      timeout=110)
    _check_training(out)
