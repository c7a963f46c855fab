"""Non-maximum suppression in ``nd.image``: the ops ``NonMaxSuppressionV3``,
``V4`` (padded), ``V5`` (scores, soft-NMS), ``NonMaxSuppressionWithOverlaps`` and
``CombinedNonMaxSuppression``, with TF1's functions over them.

Greedy as TF: boxes taken by descending score (ties by index), a box dropped
when its IoU with a kept box is above ``iou_threshold``; only scores above
``score_threshold`` are candidates. Boxes may give their corners in any order.
"""

from __future__ import annotations

from nbdist.framework import dtypes
from nbdist.framework.op_def_registry import register_op
from nbdist.framework.ops import convert_to_tensor, get_default_graph
from nbdist.framework.tensor_shape import TensorShape
from nbdist.ops.image_ops import input_rank

_INF = float("inf")


def _max_output(c, i):
    v = c.constant(i)
    return None if v is None else int(v)


def _nms_common(c, boxes_what="boxes"):
    b = input_rank(c, 0, 2, boxes_what)
    s = input_rank(c, 1, 1, "scores")
    if boxes_what == "boxes" and b[1] not in (None, 4):
        raise ValueError(f"Dimension must be 4 but is {b[1]} for '{c.name}' "
                         f"(op: '{c.op_type}') (boxes)")
    if b[0] is not None and s[0] is not None and b[0] != s[0]:
        raise ValueError(f"Dimensions must be equal, but are {b[0]} and {s[0]} "
                         f"for '{c.name}' (op: '{c.op_type}')")
    for i in range(2, 5 if c.op_type != "NonMaxSuppressionV5" else 6):
        input_rank(c, i, 0, "a scalar")
    return _max_output(c, 2)


def _v3_infer(c):
    _nms_common(c, "overlaps" if "Overlaps" in c.op_type else "boxes")
    return [(dtypes.int32, TensorShape([None]))]


def _v4_infer(c):
    n = _nms_common(c)
    size = n if c.attr("pad_to_max_output_size") else None
    return [(dtypes.int32, TensorShape([size])), (dtypes.int32, TensorShape([]))]


def _v5_infer(c):
    n = _nms_common(c)
    size = n if c.attr("pad_to_max_output_size") else None
    return [(dtypes.int32, TensorShape([size])), (c.dtype(1), TensorShape([size])),
            (dtypes.int32, TensorShape([]))]


def _combined_infer(c):
    b = input_rank(c, 0, 4, "boxes")
    s = input_rank(c, 1, 3, "scores")
    if b[2] is not None and s[2] is not None and b[2] not in (1, s[2]):
        raise ValueError("third dimension of boxes must be either 1 or equal to "
                         "the third dimension of scores")
    total = _max_output(c, 3)
    per_class = _max_output(c, 2)
    if c.attr("pad_per_class") and per_class is not None and s[2] is not None:
        total = min(total, per_class * s[2]) if total is not None else None
    n = b[0]
    return [(dtypes.float32, TensorShape([n, total, 4])),
            (dtypes.float32, TensorShape([n, total])),
            (dtypes.float32, TensorShape([n, total])),
            (dtypes.int32, TensorShape([n]))]


_T = {"T": ("type", dtypes.float32), "T_threshold": ("type", dtypes.float32)}
register_op("NonMaxSuppressionV3", _v3_infer, attrs=_T, num_inputs=5)
register_op("NonMaxSuppressionV4", _v4_infer,
            attrs=dict(_T, pad_to_max_output_size=("bool", False)), num_inputs=5)
register_op("NonMaxSuppressionV5", _v5_infer,
            attrs={"T": ("type", dtypes.float32),
                   "pad_to_max_output_size": ("bool", False)}, num_inputs=6)
register_op("NonMaxSuppressionWithOverlaps", _v3_infer, num_inputs=5)
register_op("CombinedNonMaxSuppression", _combined_infer,
            attrs={"pad_per_class": ("bool", False), "clip_boxes": ("bool", True)},
            num_inputs=6)


def _inputs(boxes, scores, max_output_size, iou_threshold, score_threshold):
    boxes = convert_to_tensor(boxes, name="boxes")
    scores = convert_to_tensor(scores, dtype=boxes.dtype.base_dtype, name="scores")
    return [boxes, scores,
            convert_to_tensor(max_output_size, dtype=dtypes.int32,
                              name="max_output_size"),
            convert_to_tensor(iou_threshold, dtype=dtypes.float32,
                              name="iou_threshold"),
            convert_to_tensor(score_threshold, dtype=dtypes.float32,
                              name="score_threshold")]


def non_max_suppression(boxes, scores, max_output_size, iou_threshold=0.5,
                        score_threshold=-_INF, name=None):
    """Indices (int32) of at most ``max_output_size`` boxes kept by greedy NMS.

    >>> import nbdist as nd
    >>> boxes = [[0, 0, 1, 1], [0, 0.1, 1, 1.1], [0, 2, 1, 3]]
    >>> with nd.Session() as s:
    ...     s.run(nd.image.non_max_suppression(boxes, [0.9, 0.8, 0.7], 3)).tolist()
    [0, 2]
    """
    ins = _inputs(boxes, scores, max_output_size, iou_threshold, score_threshold)
    with get_default_graph().name_scope(name or "non_max_suppression") as scope:
        return ins[0].graph.create_op(
            "NonMaxSuppressionV3", ins, {"T": ins[0].dtype.base_dtype},
            name=scope).outputs[0]


def non_max_suppression_with_scores(boxes, scores, max_output_size,
                                    iou_threshold=0.5, score_threshold=-_INF,
                                    soft_nms_sigma=0.0, name=None):
    """(indices, scores) of the kept boxes; with ``soft_nms_sigma`` > 0 overlapping
    boxes are down-weighted by ``exp(-iou^2 / (2 sigma))`` instead of dropped
    (Soft-NMS), and the returned scores are the down-weighted ones."""
    ins = _inputs(boxes, scores, max_output_size, iou_threshold, score_threshold)
    ins.append(convert_to_tensor(soft_nms_sigma, dtype=dtypes.float32,
                                 name="soft_nms_sigma"))
    with get_default_graph().name_scope(name or "non_max_suppression_with_scores"):
        op = ins[0].graph.create_op(
            "NonMaxSuppressionV5", ins,
            {"T": ins[0].dtype.base_dtype, "pad_to_max_output_size": False},
            name="NonMaxSuppressionV5")
        return op.outputs[0], op.outputs[1]


def non_max_suppression_padded(boxes, scores, max_output_size, iou_threshold=0.5,
                               score_threshold=-_INF, pad_to_max_output_size=False,
                               name=None, sorted_input=False,
                               canonicalized_coordinates=False, tile_size=512):
    """(indices, num_valid): with ``pad_to_max_output_size`` the indices are
    zero-padded to ``max_output_size``. ``sorted_input``,
    ``canonicalized_coordinates`` and ``tile_size`` are speed hints TF's tiled
    kernel takes; the result does not depend on them."""
    ins = _inputs(boxes, scores, max_output_size, iou_threshold, score_threshold)
    with get_default_graph().name_scope(name or "non_max_suppression_padded"):
        op = ins[0].graph.create_op(
            "NonMaxSuppressionV4", ins,
            {"T": ins[0].dtype.base_dtype,
             "pad_to_max_output_size": bool(pad_to_max_output_size)},
            name="NonMaxSuppressionV4")
        return op.outputs[0], op.outputs[1]


def non_max_suppression_overlaps(overlaps, scores, max_output_size,
                                 overlap_threshold=0.5, score_threshold=-_INF,
                                 name=None):
    """Greedy NMS over a given [n, n] ``overlaps`` matrix instead of boxes' IoU."""
    ins = _inputs(overlaps, scores, max_output_size, overlap_threshold,
                  score_threshold)
    with get_default_graph().name_scope(name or "non_max_suppression_overlaps"
                                        ) as scope:
        return ins[0].graph.create_op("NonMaxSuppressionWithOverlaps", ins, {},
                                      name=scope).outputs[0]


def combined_non_max_suppression(boxes, scores, max_output_size_per_class,
                                 max_total_size, iou_threshold=0.5,
                                 score_threshold=-_INF, pad_per_class=False,
                                 clip_boxes=True, name=None):
    """Per image and class NMS, merged by score: (nmsed_boxes [b, max_total_size,
    4], nmsed_scores, nmsed_classes, valid_detections), zero-padded.

    ``boxes`` is [b, num_boxes, q, 4] with q 1 (shared by the classes) or
    num_classes; ``scores`` [b, num_boxes, num_classes].
    """
    with get_default_graph().name_scope(name or "combined_non_max_suppression"):
        ins = [convert_to_tensor(boxes, dtype=dtypes.float32, name="boxes"),
               convert_to_tensor(scores, dtype=dtypes.float32, name="scores"),
               convert_to_tensor(max_output_size_per_class, dtype=dtypes.int32),
               convert_to_tensor(max_total_size, dtype=dtypes.int32),
               convert_to_tensor(iou_threshold, dtype=dtypes.float32),
               convert_to_tensor(score_threshold, dtype=dtypes.float32)]
        op = ins[0].graph.create_op(
            "CombinedNonMaxSuppression", ins,
            {"pad_per_class": bool(pad_per_class), "clip_boxes": bool(clip_boxes)},
            name="CombinedNonMaxSuppression")
        return tuple(op.outputs)


__all__ = [
    "combined_non_max_suppression", "non_max_suppression",
    "non_max_suppression_overlaps", "non_max_suppression_padded",
    "non_max_suppression_with_scores",
]
