"""A pytest plugin for the nbval run of a tour notebook (``test_notebooks.py``
loads it with ``-p nbval_faces``): it writes each cell's fresh outputs, as the
kernel left them, to the JSON file ``NBDIST_FRESH_OUTPUTS`` names.

"As the kernel left them": display updates applied to the outputs they update,
as nbclient and JupyterLab apply them. nbval itself drops
``update_display_data`` (a live view's last face) and any message of an
earlier cell, so it compares a view as first drawn only; this recorder sees
every iopub message nbval reads.
"""

from __future__ import annotations

import json
import os

_FRESH = "NBDIST_FRESH_OUTPUTS"


class Recorder:
    """Outputs per executed cell (in order, keyed by its code), display ids
    followed across cells."""

    def __init__(self):
        self.cells: list[dict] = []  # {"code": ..., "outputs": [...]}
        self._by_msg: dict[str, list] = {}
        self._displays: dict[str, list] = {}

    def see(self, msg: dict) -> None:
        kind, content = msg["msg_type"], msg["content"]
        parent = msg.get("parent_header", {}).get("msg_id")
        if kind == "execute_input":
            outputs: list = []
            self._by_msg[parent] = outputs
            self.cells.append({"code": content["code"], "outputs": outputs})
        elif kind in ("display_data", "execute_result") and parent in self._by_msg:
            out = {"output_type": kind, "data": dict(content["data"])}
            self._by_msg[parent].append(out)
            display_id = content.get("transient", {}).get("display_id")
            if display_id:
                self._displays.setdefault(display_id, []).append(out)
        elif kind == "update_display_data":
            display_id = content.get("transient", {}).get("display_id")
            for out in self._displays.get(display_id, ()):
                out["data"] = dict(content["data"])


def pytest_configure(config):
    path = os.environ.get(_FRESH)
    if not path:
        return
    from nbval.plugin import IPyNbFile

    recorder = Recorder()
    read = IPyNbFile.get_kernel_message

    def get_kernel_message(self, *args, **kwargs):
        msg = read(self, *args, **kwargs)
        recorder.see(msg)
        return msg

    IPyNbFile.get_kernel_message = get_kernel_message
    config._nbdist_fresh = (path, recorder)


def pytest_unconfigure(config):
    fresh = getattr(config, "_nbdist_fresh", None)
    if fresh:
        path, recorder = fresh
        with open(path, "w") as f:
            json.dump(recorder.cells, f)
