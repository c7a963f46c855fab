"""``nd.image``: TF1's ``tf.image`` functions on NumPy kernels.

>>> import nbdist as nd
>>> img = nd.constant([[[0.0], [1.0]]])          # 1 x 2 pixels, 1 channel
>>> with nd.Session() as s:
...     s.run(nd.image.flip_left_right(img)).ravel().tolist()
[1.0, 0.0]
"""

from __future__ import annotations

import importlib

__all__: list[str] = []
for _m in ("image_ops", "image_color_ops", "image_codec_ops", "image_box_ops",
           "image_resize_ops", "image_nms_ops"):
    _mod = importlib.import_module(f"nbdist.ops.{_m}")
    globals().update({n: getattr(_mod, n) for n in _mod.__all__})
    __all__ += _mod.__all__
