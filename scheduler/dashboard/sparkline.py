"""Sparklines as inline SVG: a series of numbers as one small polyline, no script needed."""

from __future__ import annotations

from collections.abc import Sequence

from markupsafe import Markup


def sparkline(values: Sequence[float], *, width: int = 160, height: int = 32, label: str) -> Markup:
    """An SVG polyline of `values` scaled to the box (the highest value touches the top); a
    flat line at the bottom when there are fewer than two values or all are zero."""
    points = list(values)[-60:] or [0.0]
    if len(points) == 1:
        points = points * 2
    top = max(points) or 1.0
    step = (width - 2) / (len(points) - 1)
    coordinates = " ".join(
        f"{1 + index * step:.1f},{height - 1 - (value / top) * (height - 2):.1f}"
        for index, value in enumerate(points)
    )
    last = points[-1]
    return Markup(
        f'<svg class="spark" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
        f'role="img" aria-label="{Markup.escape(label)}: latest {last:.1f}">'
        f"<title>{Markup.escape(label)}: latest {last:.1f}, highest {max(points):.1f}</title>"
        f'<polyline fill="none" stroke="currentColor" stroke-width="1.5" points="{coordinates}"/>'
        "</svg>"
    )
