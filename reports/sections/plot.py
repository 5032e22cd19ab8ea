"""Inline SVG line plots of a case's series (``CaseRecord.series``: name → [(seconds since the epoch, value)]).

One plot per case, every series on a shared time axis from the first point; e.g. the GPUs each queue held while
fair share settled, beside each queue's computed fair share. Lines differ by colour (Okabe-Ito, colour-blind safe)
and by dash pattern and point marker, so they stay apart in grey print; the legend repeats both. No script, no
external asset: the report stays one self-contained file.
"""

from __future__ import annotations

import math
from html import escape

WIDTH = 760
HEIGHT = 260
LEFT = 56
RIGHT = WIDTH - 16
TOP = 14
BOTTOM = HEIGHT - 34
LEGEND_ROW = 18

TEXT = "#1d2330"
MUTED = "#5b6472"
GRID = "#d5dae1"
#: Okabe-Ito without the yellow, which is too light on white.
COLOURS = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#56B4E9", "#E69F00", "#000000")
DASHES = ("", "6 4", "2 3", "8 3 2 3")
MARKERS = ("circle", "square", "diamond", "triangle")
#: Points beyond this are thinned out for drawing (every point is still in the record).
MAX_MARKERS = 40

Series = dict[str, list[tuple[float, float]]]


def _nice_step(span: float, max_ticks: int) -> float:
    """1, 2 or 5 × a power of ten, so that ``span`` needs at most ``max_ticks`` steps."""
    if span <= 0:
        return 1.0
    raw = span / max_ticks
    power = 10 ** math.floor(math.log10(raw))
    return next(m * power for m in (1, 2, 5, 10) if m * power >= raw)


def _marker(kind: str, x: float, y: float, colour: str) -> str:
    if kind == "circle":
        return f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3" fill="{colour}"/>'
    if kind == "square":
        return f'<rect x="{x - 3:.1f}" y="{y - 3:.1f}" width="6" height="6" fill="{colour}"/>'
    if kind == "diamond":
        return f'<path d="M{x:.1f},{y - 4:.1f} L{x + 4:.1f},{y:.1f} L{x:.1f},{y + 4:.1f} L{x - 4:.1f},{y:.1f} Z" fill="{colour}"/>'
    return f'<path d="M{x:.1f},{y - 4:.1f} L{x + 4:.1f},{y + 3:.1f} L{x - 4:.1f},{y + 3:.1f} Z" fill="{colour}"/>'


def render(
    series: Series,
    label: str = "observed values",
    *,
    origin: float | None = None,
    x_unit: str = " s",
    y_unit: str = "",
    lines: bool = True,
    x_min_step: float = 0.0,
    x_max: float | None = None,
) -> str:
    """One SVG with a line per series (in the given order), or "" when no series has a point.

    By default x is a time axis from the first point, ticks labelled in seconds since it. ``origin`` fixes where
    the x axis starts instead (e.g. 0 for a latency axis); ``x_unit`` and ``y_unit`` suffix the tick labels;
    ``lines=False`` draws the points only (a scatter plot, e.g. latency by gang size); ``x_min_step`` keeps x
    ticks at least that far apart (1 for a count such as a gang size); ``x_max`` extends the x axis at least
    that far (so that points at the largest x are not drawn on the plot's edge).
    """
    drawn = {name: sorted(points) for name, points in series.items() if points}
    if not drawn:
        return ""
    times = [t for points in drawn.values() for t, _ in points]
    values = [v for points in drawn.values() for _, v in points]
    start = min(times) if origin is None else min(origin, *times)
    t_span = max(max(times) - start, 1.0, (x_max or start) - start)
    low, high = min(0.0, *values), max(values)
    v_step = _nice_step(max(high - low, 1.0), 5)
    v_top = math.ceil(high / v_step) * v_step if high > 0 else v_step
    v_bottom = math.floor(low / v_step) * v_step
    t_step = max(_nice_step(t_span, 8), x_min_step)

    def x(t: float) -> float:
        return LEFT + (t - start) / t_span * (RIGHT - LEFT)

    def y(v: float) -> float:
        return BOTTOM - (v - v_bottom) / (v_top - v_bottom) * (BOTTOM - TOP)

    height = HEIGHT + LEGEND_ROW * math.ceil(len(drawn) / 2) + 6
    out = [
        f'<svg class="plot" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {height}" width="{WIDTH}" '
        f'height="{height}" role="img" aria-label="{escape(label)}" '
        'font-family="system-ui, -apple-system, Segoe UI, Roboto, Helvetica, Arial, sans-serif" font-size="11">',
        f"<title>{escape(label)}</title>",
    ]
    tick = v_bottom
    while tick <= v_top + 1e-9:
        out.append(
            f'<line x1="{LEFT}" y1="{y(tick):.1f}" x2="{RIGHT}" y2="{y(tick):.1f}" stroke="{GRID}" stroke-width="0.8"/>'
            f'<text x="{LEFT - 6}" y="{y(tick) + 4:.1f}" fill="{MUTED}" text-anchor="end">{tick:g}{escape(y_unit)}</text>'
        )
        tick += v_step
    tick = 0.0
    while tick <= t_span + 1e-9:
        out.append(
            f'<line x1="{x(start + tick):.1f}" y1="{BOTTOM}" x2="{x(start + tick):.1f}" y2="{BOTTOM + 5}" '
            f'stroke="{MUTED}"/><text x="{x(start + tick):.1f}" y="{BOTTOM + 18}" fill="{MUTED}" '
            f'text-anchor="middle">{tick + (0 if origin is None else start):g}{escape(x_unit)}</text>'
        )
        tick += t_step
    out.append(f'<line x1="{LEFT}" y1="{BOTTOM}" x2="{RIGHT}" y2="{BOTTOM}" stroke="{MUTED}"/>')
    for index, (name, points) in enumerate(drawn.items()):
        colour, dash = COLOURS[index % len(COLOURS)], DASHES[index % len(DASHES)]
        marker = MARKERS[index % len(MARKERS)]
        path = " ".join(f"{x(t):.1f},{y(v):.1f}" for t, v in points)
        every = max(1, math.ceil(len(points) / MAX_MARKERS))
        at = (lambda t: f"+{t - start:.1f} s") if origin is None else (lambda t: f"{t:g}{x_unit}")
        tip = f"{name}: " + ", ".join(f"{v:g}{y_unit} at {at(t)}" for t, v in points[:: max(1, len(points) // 8)])
        out.append(f"<g><title>{escape(tip)}</title>")
        stroke = f'stroke="{colour}" stroke-width="2"' + (f' stroke-dasharray="{dash}"' if dash else "")
        if lines:
            out.append(f'<polyline points="{path}" fill="none" {stroke}/>')
        out += [_marker(marker, x(t), y(v), colour) for t, v in (points[::every] if lines else points)]
        out.append("</g>")
        column, row = index % 2, index // 2
        lx, ly = LEFT + column * (RIGHT - LEFT) / 2, HEIGHT + row * LEGEND_ROW
        out.append(
            f'<g transform="translate({lx:.1f},{ly})"><line x1="0" y1="0" x2="26" y2="0" {stroke}/>'
            f'{_marker(marker, 13, 0, colour)}<text x="34" y="4" fill="{TEXT}">{escape(name)}</text></g>'
        )
    out.append("</svg>")
    return "".join(out)
