"""Kernels of the non-maximum-suppression ops: one greedy selection
(``greedy_nms``, with Soft-NMS re-weighting) under each op's inputs and outputs.
"""

from __future__ import annotations

import heapq

import numpy as np

import nbdist.ops.image_nms_ops  # noqa: F401  (registers the op definitions)
from nbdist import errors
from nbdist.executor.kernel import register_kernel


def _invalid(node, msg):
    return errors.InvalidArgumentError(None, node.name, msg)


def iou_matrix(boxes):
    """[n, n] intersection over union; corners may come in any order."""
    b = np.asarray(boxes, np.float64)
    y1, y2 = np.minimum(b[:, 0], b[:, 2]), np.maximum(b[:, 0], b[:, 2])
    x1, x2 = np.minimum(b[:, 1], b[:, 3]), np.maximum(b[:, 1], b[:, 3])
    area = (y2 - y1) * (x2 - x1)
    ih = np.clip(np.minimum(y2[:, None], y2) - np.maximum(y1[:, None], y1), 0, None)
    iw = np.clip(np.minimum(x2[:, None], x2) - np.maximum(x1[:, None], x1), 0, None)
    inter = ih * iw
    union = area[:, None] + area - inter
    with np.errstate(divide="ignore", invalid="ignore"):
        iou = np.where((area[:, None] > 0) & (area > 0), inter / union, 0.0)
    return iou


def greedy_nms(sim, scores, max_out, threshold, score_threshold, sigma=0.0):
    """(kept indices, their scores). A candidate is re-checked against the boxes
    kept since its last check; Soft-NMS lowers its score and re-queues it."""
    scores = np.asarray(scores, np.float64)
    scale = -0.5 / sigma if sigma > 0 else 0.0
    # A heap of (-score, index, kept-count at its last check): highest score,
    # then lowest index, first.
    heap = [(-float(scores[i]), i, 0) for i in range(len(scores))
            if scores[i] > score_threshold]
    heapq.heapify(heap)
    kept, kept_scores = [], []
    while heap and len(kept) < max_out:
        neg, i, upto = heapq.heappop(heap)
        score = original = -neg
        suppressed = False
        for j in range(len(kept) - 1, upto - 1, -1):
            s = sim[i, kept[j]]
            score *= np.exp(scale * s * s) if s <= threshold else 0.0
            if sigma <= 0 and s > threshold:
                suppressed = True
                break
            if score <= score_threshold:
                break
        if suppressed:
            continue
        if score == original:
            kept.append(i)
            kept_scores.append(score)
        elif score > score_threshold:
            heapq.heappush(heap, (-score, i, len(kept)))
    return np.asarray(kept, np.int32), np.asarray(kept_scores)


def _check(node, boxes, scores, max_out, threshold, square=False):
    if boxes.ndim != 2 or (not square and boxes.shape[1] != 4):
        raise _invalid(node, f"boxes must be 2-D [num_boxes, 4], got "
                       f"{list(boxes.shape)}")
    if scores.ndim != 1 or scores.shape[0] != boxes.shape[0]:
        raise _invalid(node, "scores has incompatible shape")
    if int(max_out) < 0:
        raise _invalid(node, "max_output_size must be non-negative")
    if not square and not 0 <= float(threshold) <= 1:
        raise _invalid(node, "iou_threshold must be in [0, 1]")


@register_kernel("NonMaxSuppressionV3")
def nms_v3_kernel(node):
    def compute(step, boxes, scores, max_out, iou_t, score_t):
        _check(node, boxes, scores, max_out, iou_t)
        return greedy_nms(iou_matrix(boxes), scores, int(max_out), float(iou_t),
                          float(score_t))[0]

    return compute


def _pad(node, kept, max_out):
    if node.attrs["pad_to_max_output_size"]:
        out = np.zeros(max_out, kept.dtype)
        out[:len(kept)] = kept
        return out
    return kept


@register_kernel("NonMaxSuppressionV4")
def nms_v4_kernel(node):
    def compute(step, boxes, scores, max_out, iou_t, score_t):
        _check(node, boxes, scores, max_out, iou_t)
        kept, _ = greedy_nms(iou_matrix(boxes), scores, int(max_out), float(iou_t),
                             float(score_t))
        return _pad(node, kept, int(max_out)), np.int32(len(kept))

    return compute


@register_kernel("NonMaxSuppressionV5")
def nms_v5_kernel(node):
    def compute(step, boxes, scores, max_out, iou_t, score_t, sigma):
        _check(node, boxes, scores, max_out, iou_t)
        if float(sigma) < 0:
            raise _invalid(node, "soft_nms_sigma must be non-negative")
        kept, kept_scores = greedy_nms(iou_matrix(boxes), scores, int(max_out),
                                       float(iou_t), float(score_t), float(sigma))
        return (_pad(node, kept, int(max_out)),
                _pad(node, kept_scores.astype(scores.dtype), int(max_out)),
                np.int32(len(kept)))

    return compute


@register_kernel("NonMaxSuppressionWithOverlaps")
def nms_overlaps_kernel(node):
    def compute(step, overlaps, scores, max_out, overlap_t, score_t):
        _check(node, overlaps, scores, max_out, overlap_t, square=True)
        return greedy_nms(np.asarray(overlaps, np.float64), scores, int(max_out),
                          float(overlap_t), float(score_t))[0]

    return compute


@register_kernel("CombinedNonMaxSuppression")
def combined_nms_kernel(node):
    pad_per_class = node.attrs["pad_per_class"]
    clip = node.attrs["clip_boxes"]

    def compute(step, boxes, scores, per_class, total, iou_t, score_t):
        if boxes.ndim != 4 or scores.ndim != 3 or boxes.shape[3] != 4:
            raise _invalid(node, "boxes must be 4-D [batch, num_boxes, q, 4] and "
                           "scores 3-D [batch, num_boxes, num_classes]")
        batch, _, q, _ = boxes.shape
        classes = scores.shape[2]
        if q not in (1, classes):
            raise _invalid(node, "third dimension of boxes must be either 1 or "
                           "equal to the third dimension of scores")
        per_class, total = int(per_class), int(total)
        if per_class <= 0 or total <= 0:
            raise _invalid(node, "max_size_per_class and max_total_size must be > 0")
        size = min(total, per_class * classes) if pad_per_class else total
        out_boxes = np.zeros((batch, size, 4), np.float32)
        out_scores = np.zeros((batch, size), np.float32)
        out_classes = np.zeros((batch, size), np.float32)
        valid = np.zeros(batch, np.int32)
        for b in range(batch):
            found = []
            for c in range(classes):
                bx = boxes[b, :, 0 if q == 1 else c]
                kept, ks = greedy_nms(iou_matrix(bx), scores[b, :, c], per_class,
                                      float(iou_t), float(score_t))
                found += [(s, c, k) for s, k in zip(ks, kept)]
            # Merged by score; equal scores keep class then box order.
            found.sort(key=lambda t: -t[0])
            found = found[:size]
            valid[b] = len(found)
            for n, (s, c, k) in enumerate(found):
                box = boxes[b, k, 0 if q == 1 else c]
                out_boxes[b, n] = np.clip(box, 0, 1) if clip else box
                out_scores[b, n], out_classes[b, n] = s, c
        return out_boxes, out_scores, out_classes, valid

    return compute
