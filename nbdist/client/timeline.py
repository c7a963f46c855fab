"""``nd.client.timeline``: Chrome traces of traced steps, as TF's
``tensorflow.python.client.timeline`` (the builder lives in
``nbdist.train.timeline``, where ``ProfilerHook`` uses it).

>>> import nbdist as nd
>>> t = nd.client.timeline.Timeline(nd.RunMetadata().step_stats)
>>> t.generate_chrome_trace_format(show_dataflow=False).count("traceEvents")
1
"""

from __future__ import annotations

from nbdist.train.timeline import (
    AllocationMaximum,
    ChromeTrace,
    StepStatsAnalysis,
    Timeline,
)

__all__ = ["AllocationMaximum", "ChromeTrace", "StepStatsAnalysis", "Timeline"]
