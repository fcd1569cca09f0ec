"""A bar chart as inline SVG, made server-side without a plotting library or JavaScript."""

from __future__ import annotations

from html import escape

#: Size of the drawing, in SVG user units (pixels at 100 %).
WIDTH, HEIGHT, MARGIN = 640, 200, 30


def render_bar_svg(points: list[tuple[str, float]], label: str) -> str:
    """Return an ``<svg>`` element with one bar per point, the tallest bar at full height.

    Parameters
    ----------
    points
        ``(x label, value)`` in drawing order (e.g. ISO days and CPU-hours).
    label
        What the values are (the chart's accessible name and y axis title).

    Returns
    -------
    str
        SVG markup; every text is escaped. An empty ``points`` draws an empty frame.
    """
    top = max((value for _, value in points), default=0.0) or 1.0
    step = (WIDTH - 2 * MARGIN) / max(len(points), 1)
    bars = []
    for index, (name, value) in enumerate(points):
        height = (HEIGHT - 2 * MARGIN) * value / top
        x = MARGIN + index * step
        bars.append(
            f'<rect x="{x:.1f}" y="{HEIGHT - MARGIN - height:.1f}" width="{max(step - 2, 1):.1f}" '
            f'height="{height:.1f}"><title>{escape(name)}: {value:.3f}</title></rect>'
        )
    first = escape(points[0][0]) if points else ""
    last = escape(points[-1][0]) if points else ""
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" '
        f'aria-label="{escape(label)}" class="usage-chart" fill="currentColor">'
        f'<text x="{MARGIN}" y="{MARGIN - 10}" font-size="12">'
        f"{escape(label)} (max {top:.3f})</text>"
        + "".join(bars)
        + f'<text x="{MARGIN}" y="{HEIGHT - 8}" font-size="11">{first}</text>'
        f'<text x="{WIDTH - MARGIN}" y="{HEIGHT - 8}" font-size="11" '
        f'text-anchor="end">{last}</text>'
        "</svg>"
    )
