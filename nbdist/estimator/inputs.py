"""``nd.estimator.inputs``: input functions over in-memory data (TF 1.x's
``estimator.inputs``): ``numpy_input_fn`` and ``pandas_input_fn``.

>>> import numpy as np, nbdist as nd
>>> fn = nd.estimator.inputs.numpy_input_fn(
...     {"x": np.arange(5.0)}, np.arange(5), batch_size=2, shuffle=False)
>>> with nd.Graph().as_default():
...     features, labels = fn()
...     with nd.Session() as sess:
...         sess.run(labels).tolist(), sess.run(labels).tolist()
([0, 1], [2, 3])
"""

from __future__ import annotations

import collections

import numpy as np

from nbdist.distribute.data.data_ops import Dataset

__all__ = ["numpy_input_fn", "pandas_input_fn"]

_TARGET_KEY = "__target_key__"


def _features_dict(x):
    if isinstance(x, dict):
        if not x:
            raise ValueError("x cannot be an empty dict")
        return collections.OrderedDict(sorted(x.items(), key=lambda t: t[0]))
    if isinstance(x, np.ndarray):
        if x.size == 0:
            raise ValueError("x cannot be an empty array")
        return collections.OrderedDict({"__direct_np_input__": x})
    raise TypeError(f"x must be a dict or array; got {type(x).__name__}")


def _batches(data, batch_size, num_epochs, shuffle, queue_capacity):
    """The next batch of ``data`` (a dict of equally long arrays), as tensors."""
    ds = Dataset.from_tensor_slices(dict(data))
    if shuffle:
        ds = ds.shuffle(queue_capacity)
    ds = ds.repeat(num_epochs).batch(batch_size)
    return ds.make_one_shot_iterator().get_next()


def numpy_input_fn(x, y=None, batch_size=128, num_epochs=1, shuffle=None,
                   queue_capacity=1000, num_threads=1):
    """An ``input_fn`` returning batches of ``x`` (a dict of arrays, or one
    array) and ``y`` (an array, a dict of arrays, or None) for ``num_epochs``
    epochs (None: forever); ``shuffle`` must be given, as in TF.

    The batches come from an ``nd.data`` pipeline (TF used feeding queues);
    ``num_threads`` is accepted and unused.
    """
    del num_threads
    if not isinstance(shuffle, bool):
        raise ValueError("shuffle must be provided and explicitly set as boolean "
                         "(it is recommended to set it as True for training); "
                         f"got {shuffle}")

    def input_fn():
        data = _features_dict(x)
        feature_keys = list(data)
        target_keys = None
        if isinstance(y, dict):
            if not y:
                raise ValueError("y cannot be empty dict, use None instead.")
            target_keys = sorted(y)
            duplicate = set(feature_keys) & set(target_keys)
            if duplicate:
                raise ValueError(f"{len(duplicate)} duplicate keys are found in both "
                                 f"x and y: {duplicate}")
            data.update((k, y[k]) for k in target_keys)
        elif y is not None:
            target_keys = _TARGET_KEY
            while target_keys in data:
                target_keys += "_n"
            data[target_keys] = y
        if len({np.shape(v)[0] for v in data.values()}) != 1:
            x_shapes = {k: np.shape(data[k]) for k in feature_keys}
            y_shapes = (None if y is None else np.shape(y)
                        if not isinstance(y, dict)
                        else {k: np.shape(v) for k, v in y.items()})
            raise ValueError(
                "Length of tensors in x and y is mismatched. All elements in x "
                f"and y must have the same length.\nShapes in x: {x_shapes}\n"
                f"Shapes in y: {y_shapes}\n")
        batch = _batches(data, batch_size, num_epochs, shuffle, queue_capacity)
        if isinstance(x, np.ndarray):
            features = batch["__direct_np_input__"]
        else:
            features = {k: batch[k] for k in feature_keys}
        if target_keys is None:
            return features
        if isinstance(target_keys, str):
            return features, batch[target_keys]
        return features, {k: batch[k] for k in target_keys}

    return input_fn


def pandas_input_fn(x, y=None, batch_size=128, num_epochs=1, shuffle=None,
                    queue_capacity=1000, num_threads=1, target_column="target"):
    """``numpy_input_fn`` over a pandas ``DataFrame`` ``x`` (one feature per
    column) and a ``Series`` ``y``; pandas must be installed."""
    try:
        import pandas as pd
    except ImportError:
        raise TypeError("pandas_input_fn should not be called without pandas "
                        "installed") from None
    if not isinstance(shuffle, bool):
        raise ValueError("shuffle must be provided and explicitly set as boolean "
                         "(it is recommended to set it as True for training); "
                         f"got {shuffle}")
    if not isinstance(x, pd.DataFrame):
        raise TypeError(f"x must be a pandas DataFrame; got {type(x).__name__}")
    if y is not None:
        if target_column in x:
            raise ValueError(f"Cannot use name {target_column} for target column: "
                             "DataFrame already has a column with that name: "
                             f"{x.columns}")
        if not np.array_equal(x.index, y.index):
            raise ValueError(f"Index for x and y are mismatched.\nIndex for x: "
                             f"{x.index}\nIndex for y: {y.index}\n")
        y = y.values
    return numpy_input_fn({c: x[c].values for c in x.columns}, y, batch_size,
                          num_epochs, shuffle, queue_capacity, num_threads)
