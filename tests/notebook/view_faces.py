"""The structure of a view's face (its text/html output): which elements it
draws, how many of each, and its words, with every number masked. Two runs of
a notebook draw the same structure (their times and counts of rounds differ);
a committed output made by older code does not (its axis, its wording, a lane
more or less).

``differences(committed, fresh)`` compares a notebook's committed cells with
the fresh outputs ``nbval_faces`` recorded.
"""

from __future__ import annotations

import collections
import re
from html.parser import HTMLParser

# Elements counted: one per task, step, link or legend entry, never one per
# measured event (a round's cell, a call's arrow, an op's bar).
COUNTED = re.compile(r"^nbdist-(lane|lifeline|member|ps-bar|heat-cell|barrier|"
                     r"ring|legend[\w-]*|cluster[\w-]*|timeline|traffic|rounds|"
                     r"staleness|collective|story|placement[\w-]*)$")
# Texts that follow what was measured, not what is drawn: left out, with the
# lines of measured figures (who arrived last, the round being gathered).
_MEASURED = re.compile(r"(?i)final state at|status at|live|·\s*$")
# A bar's or an arrow's label is drawn only where it fits, which follows the
# measured times: which ones a run labels is measured too.
# A task's steps/s and CPU (ClusterView) are measured, "–" where not running;
# so is which tasks' gradients have arrived of the round being gathered.
_MEASURED_LINES = {"nbdist-round-line", "nbdist-next-round", "nbdist-op-label",
                   "nbdist-transfer-label", "nbdist-task-load", "nbdist-arrival-mark"}
_NUMBER = re.compile(r"\d+(?:[.,:]\d+)*")
# A counted noun's plural follows the count ("redone 1 step" / "3 steps").
_COUNTED_PLURAL = re.compile(r"(# \w+?)s\b")
_TMP = re.compile(r"/tmp/[\w.-]+")  # a run's temporary directory (a logdir)
# "worker:# #×, worker:# #×" is one item however many workers the run named.
_REPEATS = re.compile(r"([^,;()]+?)(?:, \1)+")
_VOID = {"br", "img", "input", "meta", "link", "hr", "wbr", "col", "source"}


class _Face(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.kinds: set[tuple[str, str]] = set()
        self.counts: collections.Counter = collections.Counter()
        self.words: set[str] = set()
        self._open: list[bool] = []  # per open element: are its texts left out

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        classes = set((attrs.get("class") or "").split())
        if tag not in _VOID:  # <style>, <script>, <title> (hover text), measured lines
            self._open.append(tag in ("style", "script", "title")
                              or bool(classes & _MEASURED_LINES))
        if "data-task" in attrs:  # a row, lane or square per task
            self.counts["data-task"] += 1
        for cls in (attrs.get("class") or "").split():
            if cls.startswith("nbdist") and cls != "nbdist-face" \
                    and cls not in _MEASURED_LINES:
                self.kinds.add((tag, cls))
                if COUNTED.match(cls):
                    self.counts[cls] += 1

    def handle_endtag(self, tag):
        if tag not in _VOID and self._open:
            self._open.pop()

    def handle_data(self, data):
        text = " ".join(data.split())
        if text and not any(self._open) and not _MEASURED.search(text):
            text = _NUMBER.sub("#", _TMP.sub("/tmp/TMP", text))
            text = _COUNTED_PLURAL.sub(r"\1", text)
            self.words.add(_REPEATS.sub(r"\1", text))


def structure(html: str) -> dict:
    """``{"kinds", "counts", "words"}`` of a face (see the module's doc)."""
    face = _Face()
    face.feed(html)
    return {"kinds": face.kinds, "counts": dict(face.counts), "words": face.words}


def _faces(outputs) -> list[str]:
    out = []
    for o in outputs:
        html = o.get("data", {}).get("text/html", "")
        html = "".join(html) if isinstance(html, list) else html
        if "nbdist" in html and "class=" in html:
            out.append(html)
    return out


def differences(committed_cells, fresh_cells) -> list[str]:
    """What differs in structure between each code cell's committed faces and
    the fresh run's faces of the same cell (matched by code, in order)."""
    fresh = collections.defaultdict(list)
    for cell in fresh_cells:
        fresh[cell["code"]].append(cell["outputs"])
    problems = []
    for n, cell in enumerate(committed_cells):
        if cell["cell_type"] != "code":
            continue
        code = "".join(cell["source"])
        if not fresh[code]:
            problems.append(f"cell {n}: not run fresh")
            continue
        old, new = _faces(cell["outputs"]), _faces(fresh[code].pop(0))
        if len(old) != len(new):
            problems.append(f"cell {n}: {len(old)} faces committed, {len(new)} fresh")
            continue
        for i, (a, b) in enumerate(zip(old, new, strict=True)):
            sa, sb = structure(a), structure(b)
            for key in ("kinds", "counts"):
                if sa[key] != sb[key]:
                    problems.append(f"cell {n} face {i}: {key} {sa[key]} != {sb[key]}")
            if sa["words"] != sb["words"]:
                problems.append(
                    f"cell {n} face {i}: words only committed "
                    f"{sorted(sa['words'] - sb['words'])}, only fresh "
                    f"{sorted(sb['words'] - sa['words'])}")
    return problems
