"""The standard tags of a SavedModel's MetaGraphDefs (TF's values)."""

from __future__ import annotations

SERVING = "serve"
TRAINING = "train"
EVAL = "eval"
GPU = "gpu"
TPU = "tpu"
