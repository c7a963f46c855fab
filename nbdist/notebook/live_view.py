"""What every nbdist widget shares: state fed by events, a lazily built
ipywidgets view refreshed from a background thread, and text/html and
text/plain forms for places where widgets do not render (nbconvert, GitHub)."""

from __future__ import annotations

import html
import re
import threading
import time
import weakref

from nbdist.notebook.events import (
    EventFollower,
    Throttle,
    cluster_gone,
    event_source_for,
)

__all__ = [
    "LiveView",
    "clock",
    "esc",
    "freeze_scrubbers",
    "freeze_views",
    "in_kernel",
    "inline_styles",
    "short_task",
]

_live_views: weakref.WeakSet = weakref.WeakSet()  # for freeze_views
_shown_this_cell: list = []  # views that follow nothing, shown by the running cell
# Views with controls to scrub (a slider over steps) shown in this kernel: they
# stay live until freeze_scrubbers() (the tour calls it before saving).
_scrubbers: weakref.WeakSet = weakref.WeakSet()


def freeze_views(cluster):
    """Freezes every live view of ``cluster`` (it stopped): each keeps its last
    state in its outputs. Called where the cluster is stopped, in the cell that
    stops it, so that the outputs' updates reach the notebook."""
    for view in list(_live_views):
        if view.cluster is cluster:
            view.close()


def freeze_scrubbers() -> int:
    """Leaves the static face in the outputs of every view with scrub controls
    shown in this kernel (their widgets stay live until then: a notebook saved
    after this reopens without "model not found"). Returns how many."""
    views = list(_scrubbers)
    _scrubbers.clear()
    for view in views:
        view._show_static()
    return len(views)


def clock(t: float) -> str:
    """A wall time (``time.time()``) as the local time of day, 17:02:03."""
    return time.strftime("%H:%M:%S", time.localtime(t))


def esc(x) -> str:
    return html.escape(str(x), quote=True)


def short_task(task: str) -> str:
    """ "/job:worker/replica:0/task:1" -> "worker:1" (other strings unchanged)."""
    if task.startswith("/job:") and "/task:" in task:
        job = task[5:].split("/", 1)[0]
        index = task.rsplit("/task:", 1)[1].split("/", 1)[0]
        return f"{job}:{index}"
    return task


def in_kernel() -> bool:
    """Whether we run in a Jupyter kernel (where widgets can render)."""
    import sys

    if "ipykernel" not in sys.modules:
        return False
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    ip = get_ipython()
    return ip is not None and getattr(ip, "kernel", None) is not None


STYLE = (
    "<style>"
    ".nbdist{font-family:var(--jp-ui-font-family,system-ui,sans-serif);"
    "font-size:13px;line-height:1.35;color:var(--jp-ui-font-color1,#1f2328)}"
    ".nbdist h4{margin:2px 0 6px 0;font-size:14px}"
    ".nbdist table{border-collapse:collapse;margin:0}"
    ".nbdist th,.nbdist td{padding:2px 10px 2px 0;text-align:left;"
    "border:none;white-space:nowrap}"
    ".nbdist th{font-weight:600;color:var(--jp-ui-font-color2,#59636e)}"
    ".nbdist code{font-size:12px}"
    ".nbdist .dot{display:inline-block;width:9px;height:9px;border-radius:50%;"
    "margin-right:5px;vertical-align:baseline}"
    ".nbdist .chip{display:inline-block;padding:0 6px;margin:1px 3px 1px 0;"
    "border-radius:9px;font-size:12px;border:1px solid #d0d7de}"
    ".nbdist .muted{color:var(--jp-ui-font-color2,#59636e)}"
    "</style>"
)

# Where the <style> above is dropped (GitHub, an untrusted notebook in
# JupyterLab) or loses to the page's own table style (JupyterLab and nbconvert
# right-align, stripe and centre tables), the faces keep the live views' look
# through these inline styles.
_TAG_STYLES = {
    "table": "border-collapse:collapse;margin:0;table-layout:auto;width:auto;"
    "border:none",
    "tr": "background:transparent;border:none",
    "th": "text-align:left;padding:2px 10px 2px 0;border:none;white-space:nowrap;"
    "font-weight:600;vertical-align:baseline;background:transparent",
    "td": "text-align:left;padding:2px 10px 2px 0;border:none;white-space:nowrap;"
    "vertical-align:baseline;background:transparent",
}
_CLASS_STYLES = {
    "chip": "display:inline-block;padding:0 6px;margin:1px 3px 1px 0;"
    "border-radius:9px;font-size:12px;border:1px solid #d0d7de",
    "dot": "display:inline-block;width:9px;height:9px;border-radius:50%;"
    "margin-right:5px;vertical-align:baseline",
    "muted": "color:#59636e",
}
_TAG = re.compile(r"<([a-z][a-z0-9]*)\b([^>]*)>")
_CLASS_ATTR = re.compile(r"""\sclass=(['"])(.*?)\1""")
_STYLE_ATTR = re.compile(r"""\sstyle=(['"])(.*?)\1""")


def inline_styles(markup: str) -> str:
    """``markup`` with the live views' look as inline styles: on every table,
    tr, th and td, and on elements of class chip, dot and muted (before the
    element's own style, which wins)."""

    def one(m: re.Match) -> str:
        tag, attrs = m.groups()
        styles = [_TAG_STYLES[tag]] if tag in _TAG_STYLES else []
        classes = _CLASS_ATTR.search(attrs)
        if classes is not None:
            styles += [
                _CLASS_STYLES[c] for c in classes.group(2).split() if c in _CLASS_STYLES
            ]
        if not styles:
            return m.group(0)
        style = ";".join(styles)
        own = _STYLE_ATTR.search(attrs)
        if own is None:
            return f"<{tag}{attrs} style='{style}'>"
        q, rest = own.group(1), own.group(2)
        merged = f" style={q}{style};{rest}{q}"
        return f"<{tag}{attrs[: own.start()]}{merged}{attrs[own.end() :]}>"

    return _TAG.sub(one, markup)


STATE_COLORS = {
    "running": "#1a7f37",
    "starting": "#9a6700",
    "unresponsive": "#bc4c00",
    "killed": "#cf222e",
    "exited": "#cf222e",
    "error": "#cf222e",
    "stopped": "#6e7781",
    "unknown": "#6e7781",
}


class LiveView:
    """Base of the widgets. Subclasses keep their state in ``self._state`` and
    implement ``_apply(event)`` (under ``self._lock``; returns whether the view
    changed), ``_html()``, ``_text()`` and, for a custom widget, ``_build()`` and
    ``_update()``. By default the widget is one ``ipywidgets.HTML``.

    ``source`` is an event source (see ``nbdist.notebook.events``) or a shared
    ``EventFollower`` (``follower=``); ``cluster`` finds the source itself.
    """

    kinds: tuple | None = None  # event kinds this view reads (None: all)
    refresh_s = 0.1
    face_class = ""  # a class of the html face (as the live widget's, to find it)

    def __init__(
        self,
        cluster=None,
        *,
        source=None,
        follower=None,
        target=None,
        from_seq: int = 0,
        live: bool = True,
    ):
        self.cluster = cluster
        self._lock = threading.RLock()
        self._state_changed = threading.Condition(self._lock)  # the state changed
        self.received = 0  # events delivered to this view
        self.last_seq = 0
        self.out_of_order = 0
        self._epoch = 0
        self._widget = None
        self._closed = False
        self._throttle = Throttle(
            self._refresh, self.refresh_s, name=f"nbdist-{type(self).__name__}"
        )
        self._own_follower = False
        self.follower = None
        self.live = live
        self.frozen_at: float | None = None  # when the view stopped following
        self._handles: list = []  # the display ids this view was shown under
        if live:
            _live_views.add(self)
            if follower is None:
                if source is None:
                    source = event_source_for(cluster, target)
                if source is not None:
                    follower = EventFollower(
                        source,
                        from_seq=from_seq,
                        name=f"nbdist-events-{type(self).__name__}",
                        until=lambda: cluster is not None and cluster_gone(cluster),
                    )
                    self._own_follower = True
            if follower is not None:
                self.follower = follower
                follower.subscribe(self._on_event)
                follower.start()
                if self._own_follower:
                    # Catch up with what happened before, so that the view shows
                    # the cluster as it is now from the start.
                    follower.sync(timeout=3.0, quiet_s=0.2)

    # -- events ---------------------------------------------------------------------
    def _on_event(self, event):
        with self._lock:
            epoch = self.follower.restarts if self.follower is not None else 0
            if epoch != self._epoch:  # the service restarted: numbering anew
                self._epoch, self.last_seq = epoch, 0
            if event.seq <= self.last_seq:
                self.out_of_order += 1
                return
            self.last_seq = event.seq
            self.received += 1
            if self.kinds is not None and event.kind not in self.kinds:
                return
            changed = self._apply(event)
            if changed:
                self._state_changed.notify_all()
        if changed:
            self._throttle.poke()

    def apply(self, event):
        """Feeds one event by hand (as the follower does)."""
        self._on_event(event)

    def _apply(self, event) -> bool:
        return False

    def sync(self, timeout: float = 10.0) -> bool:
        """Waits until the view has every event its source has now, and draws it."""
        ok = True
        if self.follower is not None:
            ok = self.follower.sync(timeout)
        self.refresh()
        return ok

    def refresh(self):
        """Redraws the widget now from the current state."""
        self._throttle.poke()
        self._throttle.flush()

    def _changed(self):
        self._throttle.poke()

    # -- widget -------------------------------------------------------------------------
    @property
    def widget(self):
        """The ipywidgets view (built on first use)."""
        with self._lock:
            if self._widget is None:
                self._widget = self._build()
            return self._widget

    def _build(self):
        import ipywidgets as w

        return w.HTML(value=self._full_html())

    def _update(self, widget):
        value = self._full_html()
        if widget.value != value:
            widget.value = value

    def _refresh(self):
        widget = self._widget
        if widget is None:
            return
        with self._lock:
            self._update(widget)

    def close(self):
        """Stops following events (and the follower, if this view owns it) and
        leaves the last state in every output the view was displayed in."""
        self.freeze()

    def freeze(self):
        """Stops following; the widget and each output this view was displayed
        in (their text/html and text/plain, which a static render shows) keep
        the last state and its history. Returns the view."""
        with self._lock:
            if self._closed:
                return self
            self._closed = True
            if self.live:
                self.frozen_at = time.time()
        if self.follower is not None:
            self.follower.unsubscribe(self._on_event)
            if self._own_follower:
                self.follower.stop()
        self._throttle.close()
        self._refresh()
        self._update_displays()
        return self

    def _update_displays(self):
        """Replaces each output this view was shown in by its static face: the
        widget goes (its state is not saved with the notebook, so a reopened
        notebook would say "model not found"); text/html (or an image) and
        text/plain, which every renderer shows without JavaScript, stay."""
        handles, self._handles = self._handles, []
        if not handles:
            return
        bundle = self._static_bundle()
        for handle in handles:
            try:
                handle.update(bundle, raw=True)
            except Exception:  # noqa: BLE001, S110 - the kernel is going away
                pass

    # -- representations -------------------------------------------------------------
    def _html(self) -> str:
        raise NotImplementedError

    def _text(self) -> str:
        raise NotImplementedError

    def face(self) -> str:
        """What the text and html forms say about when they were drawn: "live"
        (redrawn until the cluster stops) or "final state at 17:02:03"; "" for
        a view that never followed a cluster."""
        if self.frozen_at is not None:
            return f"final state at {clock(self.frozen_at)}"
        return "live" if self.live else ""

    def _face_text(self) -> str:
        face = self.face()
        text = self._text()
        if not face:
            return text
        first, _, rest = text.partition("\n")
        return f"{first}  ({face})" + (f"\n{rest}" if rest else "")

    def _full_html(self) -> str:
        face = self.face()
        mark = (
            f"<div class='muted nbdist-face' data-face='{face.split()[0]}'>"
            f"{esc(face)}</div>"
            if face
            else ""
        )
        body = inline_styles(self._html() + mark)
        classes = f"nbdist {self.face_class}".strip()
        return f'{STYLE}<div class="{classes}">{body}</div>'

    def _repr_html_(self):
        with self._lock:
            return self._full_html()

    def _repr_pretty_(self, p, cycle):
        with self._lock:
            p.text(self._face_text())

    def __repr__(self):
        with self._lock:
            return self._face_text()

    def _ipython_display_(self):
        # Shown under a display id, so that freeze() can leave the last state in
        # the output's text/html and text/plain (what static renders show).
        from IPython.display import display

        handle = display(self._repr_mimebundle_(), raw=True, display_id=True)
        if handle is not None and not self._closed:
            self._handles.append(handle)
            if self.scrubbable():  # its slider stays live, beside its face
                _scrubbers.add(self)
            elif not self.live:  # nothing will freeze it: the cell's end does
                _freeze_at_cell_end(self)

    def scrubbable(self) -> bool:
        """Whether the live widget has controls to scrub through what the view
        holds (steps, rounds): then it is not turned into its static face when
        its cell ends, only by ``freeze_scrubbers()``."""
        return False

    def _static_bundle(self) -> dict:
        """The forms a static render (nbconvert, GitHub, no kernel) shows."""
        return {"text/plain": repr(self), "text/html": self._repr_html_()}

    def _with_widget(self, data: dict) -> dict:
        if in_kernel():
            data = {**data, **self.widget._repr_mimebundle_()}
            data["text/plain"] = repr(self)
        return data

    def _show_static(self):
        """The outputs of a view that follows nothing get its static face when
        the cell that showed it ends (the view itself stays usable)."""
        with self._lock:
            self._refresh()
        self._update_displays()

    def _repr_mimebundle_(self, include=None, exclude=None):
        # A frozen view is shown without its widget: with saved widget state,
        # nbconvert and JupyterLab would draw the widget instead of the html.
        if self._closed:
            return self._static_bundle()
        return self._with_widget(self._static_bundle())


def _freeze_at_cell_end(view: LiveView):
    from IPython import get_ipython

    ip = get_ipython()
    if ip is None:
        return
    _shown_this_cell.append(view)
    callbacks = ip.events.callbacks.get("post_run_cell", [])
    if _show_static_faces not in callbacks:
        ip.events.register("post_run_cell", _show_static_faces)


def _show_static_faces(result=None):
    """After each cell: the views it showed that follow nothing (a timeline, a
    placement of a graph) keep their static face only."""
    views, _shown_this_cell[:] = list(_shown_this_cell), []
    for view in views:
        view._show_static()
