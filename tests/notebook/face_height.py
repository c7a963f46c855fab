"""A static face's height as a browser stacks it, estimated from its markup
without one: each drawing (an ``<svg>``) its declared height, each heading,
table row and line of text (a ``<div>`` holding words) one line. Where the
blocks stack it is within a few px of what Chromium lays out (faces of 32
tasks: TimelineView 475 estimated, 474 measured; CollectiveView 586, 589;
StalenessView 402, 399); blocks side by side
(inline rings, flex cards) are counted one under another, so there it
overestimates. tests/browser/test_browser_scale_views.py measures in Chromium."""

from __future__ import annotations

from html.parser import HTMLParser

LINE_PX = {"h4": 26, "tr": 22, "div": 22}
_BLOCKS = ("h4", "tr", "div")
_VOID = {"br", "img", "input", "meta", "link", "hr", "wbr", "col", "source"}


class _Height(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.px = 0.0
        self._open: list[list] = []  # [tag, counted] per open element
        self._svg = 0  # depth inside an <svg>
        self._hidden = 0  # inside <style>/<title>

    def handle_starttag(self, tag, attrs):
        if tag in _VOID:
            return
        if tag == "svg":
            if self._svg == 0:
                self.px += float(dict(attrs).get("height", 0))
            self._svg += 1
        if tag in ("style", "title", "script"):
            self._hidden += 1
        self._open.append([tag, False])

    def handle_endtag(self, tag):
        if tag in _VOID:
            return
        while self._open:
            open_tag, _ = self._open.pop()
            if open_tag == "svg":
                self._svg -= 1
            if open_tag in ("style", "title", "script"):
                self._hidden -= 1
            if open_tag == tag:
                break

    def handle_data(self, data):
        if not data.strip() or self._svg or self._hidden:
            return
        for entry in reversed(self._open):  # the innermost block holds the line
            if entry[0] in _BLOCKS:
                if not entry[1]:
                    entry[1] = True
                    self.px += LINE_PX[entry[0]]
                return


def face_height(html: str) -> float:
    """The estimated height in px of a face (see the module's doc)."""
    parser = _Height()
    parser.feed(html)
    return parser.px
