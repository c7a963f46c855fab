"""Imports every op-definition module, so a graph received over the wire finds
its ops even when the process never built one of that kind."""

from __future__ import annotations

import importlib

OP_MODULES = (
    "array_ops", "state_ops", "control_flow_ops", "variables", "math_ops",
    "array_ops_more", "clip_ops", "nn_ops", "random_ops", "data_flow_ops",
    "accumulator_ops", "training_ops", "gradients", "control_flow_api", "summary_ops",
    "collective_ops",
    "linalg_ops", "complex_ops",
    "sparse_ops", "sparse_training_ops",
    "parsing_ops", "reader_ops", "string_ops",
    "nn_conv_ops", "nn_pool_ops", "nn_norm_ops", "image_ops",
    "lookup_ops",
)


def load_all():
    for m in OP_MODULES:
        try:
            importlib.import_module(f"nbdist.graph.{m}")
        except ModuleNotFoundError as e:
            if e.name != f"nbdist.graph.{m}":
                raise
    # Ops defined outside the graph package (datasets, functions) register here.
    for m in ("nbdist.distribute.data.data_ops",
              "nbdist.distribute.tracing.function_ops"):
        try:
            importlib.import_module(m)
        except ModuleNotFoundError as e:
            if e.name != m:
                raise
