"""Serving inputs (TF's ``estimator/export/export.py``): what a
``serving_input_receiver_fn`` returns, and the two builders of such functions.

>>> import nbdist as nd
>>> fn = nd.estimator.export.build_raw_serving_input_receiver_fn(
...     {"x": nd.placeholder(nd.float32, [8, 3])})
>>> with nd.Graph().as_default():
...     receiver = fn()
>>> receiver.receiver_tensors["x"].shape.as_list()
[None, 3]
"""

from __future__ import annotations

import collections
import logging
import os
import time

from nbdist.framework import dtypes, ops
from nbdist.framework.constant_op import placeholder
from nbdist.framework.sparse_tensor import SparseTensor
from nbdist.framework.tensor_shape import TensorShape
from nbdist.ops.parsing_ops import parse_example
from nbdist.saved_model import signature_def_utils

_log = logging.getLogger("nbdist.estimator")

__all__ = ["ServingInputReceiver", "TensorServingInputReceiver",
           "build_parsing_serving_input_receiver_fn",
           "build_raw_serving_input_receiver_fn"]

SINGLE_FEATURE_DEFAULT_NAME = "feature"
SINGLE_RECEIVER_DEFAULT_NAME = "input"
SINGLE_LABEL_DEFAULT_NAME = "label"

_SINGLE_TENSOR_DEFAULT_NAMES = {
    "feature": SINGLE_FEATURE_DEFAULT_NAME,
    "label": SINGLE_LABEL_DEFAULT_NAME,
    "receiver_tensor": SINGLE_RECEIVER_DEFAULT_NAME,
    "receiver_tensors_alternative": SINGLE_RECEIVER_DEFAULT_NAME,
}


def wrap_and_check_input_tensors(tensors, field_name, allow_int_keys=False):
    """``tensors`` as a dict of names to ``Tensor``/``SparseTensor`` (a single
    tensor is named by ``field_name``'s default), checked as TF checks it."""
    if tensors is None:
        raise ValueError(f"{field_name}s must be defined.")
    if not isinstance(tensors, dict):
        tensors = {_SINGLE_TENSOR_DEFAULT_NAMES[field_name]: tensors}
    for name, tensor in tensors.items():
        if not isinstance(name, str):
            if not allow_int_keys:
                raise ValueError(f"{field_name} keys must be strings: {name}.")
            if not isinstance(name, int):
                raise ValueError(f"{field_name} keys must be strings or ints: {name}.")
        _check_tensor(tensor, name, field_name)
    return tensors


def _check_tensor(tensor, name, error_label="feature"):
    if not isinstance(tensor, (ops.Tensor, SparseTensor)):
        named = f" {name}" if name else ""
        raise ValueError(f"{error_label}{named} must be a Tensor or SparseTensor.")


class ServingInputReceiver(collections.namedtuple(
        "ServingInputReceiver",
        ["features", "receiver_tensors", "receiver_tensors_alternatives"])):
    """What a ``serving_input_receiver_fn`` returns: the ``features`` given to the
    model and the ``receiver_tensors`` a client feeds (each a tensor or a dict;
    a lone feature is named ``feature``, a lone receiver tensor ``input``)."""

    def __new__(cls, features, receiver_tensors, receiver_tensors_alternatives=None):
        features = wrap_and_check_input_tensors(features, "feature",
                                                allow_int_keys=True)
        receiver_tensors = wrap_and_check_input_tensors(receiver_tensors,
                                                        "receiver_tensor")
        if receiver_tensors_alternatives is not None:
            if not isinstance(receiver_tensors_alternatives, dict):
                raise ValueError("receiver_tensors_alternatives must be a dict: "
                                 f"{receiver_tensors_alternatives}.")
            receiver_tensors_alternatives = {
                name: wrap_and_check_input_tensors(alt, "receiver_tensors_alternative")
                for name, alt in receiver_tensors_alternatives.items()}
        return super().__new__(cls, features, receiver_tensors,
                               receiver_tensors_alternatives)


class TensorServingInputReceiver(collections.namedtuple(
        "TensorServingInputReceiver",
        ["features", "receiver_tensors", "receiver_tensors_alternatives"])):
    """A ``ServingInputReceiver`` whose ``features`` stay one tensor (for a
    ``model_fn`` that takes a raw tensor, not a dict)."""

    def __new__(cls, features, receiver_tensors, receiver_tensors_alternatives=None):
        if features is None:
            raise ValueError("features must be defined.")
        _check_tensor(features, None)
        receiver = ServingInputReceiver(features, receiver_tensors,
                                        receiver_tensors_alternatives)
        return super().__new__(cls, receiver.features[SINGLE_FEATURE_DEFAULT_NAME],
                               receiver.receiver_tensors,
                               receiver.receiver_tensors_alternatives)


def build_parsing_serving_input_receiver_fn(feature_spec, default_batch_size=None):
    """A ``serving_input_receiver_fn`` that is fed serialized ``tf.Example``s
    (``examples``, a string placeholder named ``input_example_tensor``) and
    parses them with ``feature_spec`` into the model's features."""
    def serving_input_receiver_fn():
        serialized = placeholder(dtypes.string, [default_batch_size],
                                 name="input_example_tensor")
        features = parse_example(serialized, feature_spec)
        return ServingInputReceiver(features, {"examples": serialized})

    return serving_input_receiver_fn


def _placeholder_like(t, default_batch_size=None):
    shape = TensorShape([default_batch_size]).concatenate(t.get_shape()[1:])
    return placeholder(t.dtype, shape, name=getattr(getattr(t, "op", None),
                                                     "name", None))


def build_raw_serving_input_receiver_fn(features, default_batch_size=None):
    """A ``serving_input_receiver_fn`` fed the raw feature tensors: a placeholder
    per feature, of its dtype and shape with a free batch dimension."""

    def serving_input_receiver_fn():
        receiver_tensors = {name: _placeholder_like(t, default_batch_size)
                            for name, t in features.items()}
        return ServingInputReceiver(receiver_tensors, receiver_tensors)

    return serving_input_receiver_fn


def build_all_signature_defs(receiver_tensors, export_outputs,
                             receiver_tensors_alternatives=None):
    """The serving ``SignatureDef``s of ``export_outputs`` over the receiver's
    tensors (and ``"<alternative>:<output>"`` over each alternative); an output
    that cannot be served with these inputs is left out, as TF does."""
    if not isinstance(receiver_tensors, dict):
        receiver_tensors = {SINGLE_RECEIVER_DEFAULT_NAME: receiver_tensors}
    if export_outputs is None or not isinstance(export_outputs, dict):
        raise ValueError(f"export_outputs must be a dict and not{type(export_outputs)}")
    groups = [("", receiver_tensors)]
    for name, tensors in (receiver_tensors_alternatives or {}).items():
        if not isinstance(tensors, dict):
            tensors = {SINGLE_RECEIVER_DEFAULT_NAME: tensors}
        groups.append((f"{name or 'None'}:", tensors))
    signature_def_map = {}
    for prefix, tensors in groups:
        for key, output in export_outputs.items():
            try:
                signature = output.as_signature_def(tensors)
            except ValueError as e:
                _log.info("Signature %r excluded from export: %s", prefix + key, e)
                continue
            signature_def_map[f"{prefix}{key or 'None'}"] = signature
    return {k: v for k, v in signature_def_map.items()
            if signature_def_utils.is_valid_signature(v)}


def get_timestamped_export_dir(export_dir_base) -> bytes:
    """``<export_dir_base>/<seconds since the epoch>`` as bytes (TF's type), the
    next free second if that directory exists already."""
    timestamp = int(time.time())
    while True:  # bounded by the directories that exist
        result = os.path.join(os.fsencode(export_dir_base),
                              str(timestamp).encode())
        if not os.path.exists(result):
            return result
        timestamp += 1


def get_temp_export_dir(timestamped_export_dir) -> bytes:
    """``temp-<timestamp>`` beside the export: written there, then renamed."""
    dirname, basename = os.path.split(os.fsencode(timestamped_export_dir))
    return os.path.join(dirname, b"temp-" + basename)
