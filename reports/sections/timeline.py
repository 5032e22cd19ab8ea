"""Inline SVG timelines: one row per pod, created → bound → running → evicted, so all-or-nothing is visible.

A gang that was placed whole shows its pods' bound ticks stacked on one vertical; a gang that was not shows
every row pending to the end; partial placement (the violation) shows some rows bound and others pending.
Preemption shows the victims' running bars ending in an eviction mark before the preemptor's pods bind.

Shapes, not only colours, tell the phases apart (dashed line: pending; thin bar: bound, starting; thick bar:
running; cross: evicted), and the colours are from the Okabe-Ito colour-blind-safe palette.
"""

from __future__ import annotations

from html import escape

from kai_conformance.reports.model import WorkloadTimeline

WIDTH = 760
LABEL_WIDTH = 210
PLOT_LEFT = LABEL_WIDTH + 10
PLOT_RIGHT = WIDTH - 20
ROW = 20
HEADER = 24
AXIS = 30
LEGEND = 26

PENDING = "#7a7a7a"
STARTING = "#56B4E9"
RUNNING = "#0072B2"
EVICTED = "#D55E00"
PARTIAL = "#D55E00"
TEXT = "#1d2330"
MUTED = "#5b6472"

NICE_STEPS = (0.1, 0.2, 0.5, 1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 1200, 1800, 3600)


def _step(span: float, max_ticks: int = 8) -> float:
    return next((s for s in NICE_STEPS if span / s <= max_ticks), NICE_STEPS[-1])


def _fmt(seconds: float | None) -> str:
    return "—" if seconds is None else f"+{seconds:.1f} s"


def _short(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _first_event(workload: WorkloadTimeline) -> float:
    return min((t for p in workload.pods for t in (p.created, p.bound, p.running, p.evicted) if t is not None),
               default=float("inf"))  # fmt: skip


def _node_labels(workloads: list[WorkloadTimeline]) -> dict[str, str]:
    """Node names without the prefix they all share (``kai-conformance-worker2`` → ``worker2``)."""
    nodes = sorted({p.node for w in workloads for p in w.pods if p.node})
    if len(nodes) < 2:
        return {n: n for n in nodes}
    first, last = nodes[0], nodes[-1]  # sorted: their common prefix is everyone's
    shared = next((i for i, (a, b) in enumerate(zip(first, last, strict=False)) if a != b), min(len(first), len(last)))
    prefix = first[:shared][: first[:shared].rfind("-") + 1]
    return {n: n[len(prefix) :] or n for n in nodes}


def render(workloads: list[WorkloadTimeline], label: str = "pod timeline") -> str:
    """One SVG for the workloads of a case, in order of appearance, on a time axis from the first event."""
    workloads = sorted(workloads, key=_first_event)
    nodes = _node_labels(workloads)
    times = [
        t
        for w in workloads
        for p in w.pods
        for t in (p.created, p.bound, p.running, p.evicted, p.observed)
        if t is not None
    ]
    if not times:
        return ""
    start = min(times)
    span = max(max(times) - start, 1.0) * 1.08
    scale = (PLOT_RIGHT - PLOT_LEFT) / span

    def x(t: float) -> float:
        return PLOT_LEFT + (t - start) * scale

    end_x = x(max(times))  # the last observation: pending and running bars end here
    rows = sum(len(w.pods) for w in workloads)
    height = LEGEND + len(workloads) * HEADER + rows * ROW + AXIS
    out = [
        f'<svg class="timeline" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {height}" '
        f'width="{WIDTH}" height="{height}" role="img" aria-label="{escape(label)}" '
        'font-family="system-ui, -apple-system, Segoe UI, Roboto, Helvetica, Arial, sans-serif" font-size="11">',
        f"<title>{escape(label)}</title>",
    ]
    out += _legend()
    # Backgrounds first, then the time grid, then the rows: nothing hides a bar.
    y = LEGEND
    for workload in workloads:
        y += HEADER
        for index in range(len(workload.pods)):
            if index % 2 == 0:
                out.append(f'<rect x="0" y="{y + index * ROW}" width="{WIDTH}" height="{ROW}" fill="#f3f5f8"/>')
        y += len(workload.pods) * ROW
    out += _axis(LEGEND, y, start, span, _step(span), x)
    y = LEGEND
    for workload in workloads:
        colour = PARTIAL if workload.partial else TEXT
        out.append(
            f'<text x="4" y="{y + 16}" font-weight="600" fill="{TEXT}">{escape(_short(workload.workload, 34))}</text>'
            f'<text x="{PLOT_LEFT}" y="{y + 16}" fill="{colour}" font-weight="{600 if workload.partial else 400}">'
            f"{escape(workload.summary)}</text>"
        )
        y += HEADER
        for pod in workload.pods:
            out += _row(pod, nodes.get(pod.node or "", ""), y, start, x, end_x)
            y += ROW
    out.append("</svg>")
    return "".join(out)


def _legend() -> list[str]:
    items = [
        (f'<line x1="0" y1="0" x2="22" y2="0" stroke="{PENDING}" stroke-width="2" stroke-dasharray="4 3"/>', "pending"),
        (f'<rect x="0" y="-3" width="22" height="6" fill="{STARTING}"/>', "bound, starting"),
        (f'<rect x="0" y="-5" width="22" height="10" fill="{RUNNING}"/>', "running"),
        (_cross(11, 0, EVICTED), "evicted"),
    ]
    out, cursor = [], 4
    for shape, text in items:
        out.append(
            f'<g transform="translate({cursor},12)">{shape}<text x="28" y="4" fill="{MUTED}">{escape(text)}</text></g>'
        )
        cursor += 40 + 7 * len(text)
    return out


def _cross(cx: float, cy: float, colour: str, size: float = 5) -> str:
    return (
        f'<path d="M{cx - size},{cy - size} L{cx + size},{cy + size} M{cx - size},{cy + size} L{cx + size},{cy - size}" '
        f'stroke="{colour}" stroke-width="2.5" stroke-linecap="round"/>'
    )


def _row(pod, node: str, y: float, start: float, x, end_x: float) -> list[str]:
    mid = y + ROW / 2
    rel = {k: (getattr(pod, k) - start if getattr(pod, k) is not None else None) for k in
           ("created", "bound", "running", "evicted")}  # fmt: skip
    tip = (
        f"{pod.pod} on {pod.node or 'no node'}: created {_fmt(rel['created'])}, bound {_fmt(rel['bound'])}, "
        f"running {_fmt(rel['running'])}, evicted {_fmt(rel['evicted'])}"
    )
    out = [f"<g><title>{escape(tip)}</title>"]
    out.append(f'<text x="10" y="{mid + 4}" fill="{TEXT}">{escape(_short(pod.pod, 26))}</text>')
    if node:
        out.append(
            f'<text x="{LABEL_WIDTH}" y="{mid + 4}" fill="{MUTED}" text-anchor="end" font-size="10">'
            f"{escape(_short(node, 12))}</text>"
        )
    created = x(pod.created if pod.created is not None else start)
    stop = x(pod.evicted) if pod.evicted is not None else end_x
    pending_end = x(pod.bound) if pod.bound is not None else stop
    out.append(
        f'<line x1="{created:.1f}" y1="{mid}" x2="{pending_end:.1f}" y2="{mid}" stroke="{PENDING}" '
        'stroke-width="2" stroke-dasharray="4 3"/>'
    )
    out.append(f'<circle cx="{created:.1f}" cy="{mid}" r="3" fill="#fff" stroke="{PENDING}" stroke-width="1.5"/>')
    if pod.bound is not None:
        bound = x(pod.bound)
        starting_end = x(pod.running) if pod.running is not None else stop
        out.append(
            f'<rect x="{bound:.1f}" y="{mid - 3}" width="{max(starting_end - bound, 1.5):.1f}" height="6" '
            f'fill="{STARTING}"/>'
        )
        out.append(f'<line x1="{bound:.1f}" y1="{mid - 7}" x2="{bound:.1f}" y2="{mid + 7}" stroke="{TEXT}" '
                   'stroke-width="1.5"/>')  # fmt: skip
        if pod.running is not None:
            running = x(pod.running)
            out.append(
                f'<rect x="{running:.1f}" y="{mid - 5}" width="{max(stop - running, 1.5):.1f}" height="10" '
                f'fill="{RUNNING}" rx="1"/>'
            )
    elif pod.evicted is None:
        out.append(
            f'<rect x="{end_x - 74:.1f}" y="{mid - 7}" width="74" height="14" fill="#fff" opacity="0.85"/>'
            f'<text x="{end_x - 2:.1f}" y="{mid + 4}" fill="{MUTED}" font-style="italic" text-anchor="end">'
            "never bound</text>"
        )
    if pod.evicted is not None:
        out.append(_cross(x(pod.evicted), mid, EVICTED))
    out.append("</g>")
    return out


def _axis(top: float, bottom: float, start: float, span: float, step: float, x) -> list[str]:
    out = [f'<line x1="{PLOT_LEFT}" y1="{bottom + 4}" x2="{PLOT_RIGHT}" y2="{bottom + 4}" stroke="{MUTED}"/>']
    tick = 0.0
    while tick <= span + 1e-9:
        tx = x(start + tick)
        label = f"{tick:g} s"
        out.append(
            f'<line x1="{tx:.1f}" y1="{top}" x2="{tx:.1f}" y2="{bottom + 8}" stroke="#d5dae1" stroke-width="0.8"/>'
            f'<text x="{tx:.1f}" y="{bottom + 20}" fill="{MUTED}" text-anchor="middle">{label}</text>'
        )
        tick += step
    return out
