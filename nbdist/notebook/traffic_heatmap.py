"""``TrafficView``'s task × task matrix as a heat map, for clusters too large
for a table of cells (more than ``HEATMAP_AT`` tasks): one small square per
(source, destination), darker the more bytes per second went that way;
hovering a square gives its calls and bytes."""

from __future__ import annotations

from nbdist.notebook.live_view import esc
from nbdist.notebook.timeline_model import format_bytes, member_label

__all__ = ["HEATMAP_AT", "heatmap_svg"]

HEATMAP_AT = 8  # more tasks than this: the heat map, no sequence diagram
_SIDE_PX = 440  # the map's side, at most


def _shade(fraction: float) -> str:
    """White (nothing) to dark blue (the busiest link)."""
    f = max(0.0, min(1.0, fraction))
    r, g, b = (int(246 - f * (246 - c)) for c in (9, 105, 218))
    return f"rgb({r},{g},{b})"


def heatmap_svg(tasks: list[str], matrix: dict, seconds: float) -> str:
    """``tasks`` (short names, in lane order) as rows (from) and columns (to);
    ``matrix`` {(source, destination): (calls, bytes)} over ``seconds``."""
    n = max(1, len(tasks))
    cell = max(6, min(18, _SIDE_PX // n))
    left = top = 40
    top_bytes = max((b for _, b in matrix.values()), default=0) or 1
    parts = []
    for i, t in enumerate(tasks):
        y = top + i * cell + cell * 0.75
        x = left + i * cell + cell / 2
        parts.append(f"<text x='{left - 4}' y='{y:.1f}' text-anchor='end' "
                     f"font-size='9'>{esc(member_label(t))}</text>")
        parts.append(f"<text x='{x:.1f}' y='{top - 4}' text-anchor='start' "
                     f"font-size='9' transform='rotate(-60 {x:.1f} {top - 4})'>"
                     f"{esc(member_label(t))}</text>")
    for i, src in enumerate(tasks):
        for j, dst in enumerate(tasks):
            calls, nbytes = matrix.get((src, dst), (0, 0))
            if not calls:
                continue
            tip = (f"{src} → {dst}: {calls} calls, {format_bytes(nbytes)} "
                   f"({format_bytes(int(nbytes / seconds))}/s, "
                   f"{calls / seconds:.0f} calls/s)")
            parts.append(
                f"<rect class='nbdist-heat-cell' data-source='{esc(src)}' "
                f"data-destination='{esc(dst)}' data-bytes='{nbytes}' "
                f"data-calls='{calls}' x='{left + j * cell}' y='{top + i * cell}' "
                f"width='{cell - 1}' height='{cell - 1}' "
                f"fill='{_shade(nbytes / top_bytes)}'><title>{esc(tip)}</title></rect>")
    side = left + n * cell
    legend_y = side + 16
    steps = "".join(
        f"<rect x='{left + k * 16}' y='{legend_y}' width='16' height='8' "
        f"fill='{_shade(k / 7)}'/>" for k in range(8))
    legend = (f"{steps}<text x='{left + 8 * 16 + 6}' y='{legend_y + 8}' "
              f"font-size='10'>0 … {format_bytes(int(top_bytes / seconds))}/s "
              "(rows send, columns receive)</text>")
    return (f"<svg class='nbdist-traffic-heatmap' width='{side + 220}' "
            f"height='{legend_y + 14}' xmlns='http://www.w3.org/2000/svg' "
            f"font-family='system-ui,sans-serif'>"
            f"<rect x='{left}' y='{top}' width='{n * cell}' height='{n * cell}' "
            f"fill='none' stroke='#d0d7de'/>{''.join(parts)}{legend}</svg>")
