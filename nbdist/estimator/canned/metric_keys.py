"""The names a canned head gives its evaluation metrics and predictions (TF
1.15's ``canned/metric_keys.py`` and ``canned/prediction_keys.py``)."""

from __future__ import annotations


class MetricKeys:
    """Metric names, as ``evaluate`` returns them."""

    LOSS = "loss"
    LOSS_MEAN = "average_loss"
    LOSS_REGULARIZATION = "regularization_loss"
    ACCURACY = "accuracy"
    PRECISION = "precision"
    RECALL = "recall"
    ACCURACY_BASELINE = "accuracy_baseline"
    AUC = "auc"
    AUC_PR = "auc_precision_recall"
    LABEL_MEAN = "label/mean"
    PREDICTION_MEAN = "prediction/mean"
    ACCURACY_AT_THRESHOLD = "accuracy/positive_threshold_%g"
    PRECISION_AT_THRESHOLD = "precision/positive_threshold_%g"
    RECALL_AT_THRESHOLD = "recall/positive_threshold_%g"


class PredictionKeys:
    """Keys of a canned head's predictions dict."""

    CLASSES = "classes"
    CLASS_IDS = "class_ids"
    ALL_CLASSES = "all_classes"
    ALL_CLASS_IDS = "all_class_ids"
    LOGISTIC = "logistic"
    LOGITS = "logits"
    PREDICTIONS = "predictions"
    PROBABILITIES = "probabilities"
