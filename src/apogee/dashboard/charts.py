"""Line charts of sampled figures, drawn on the server as SVG (pygal).

Owns: ``line_chart``, one SVG document per chart that loads nothing from
outside the page (pygal's tooltip script is left out; its inline settings
stay, unused), so it can be put into the HTML as it is.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping

import pygal
from pygal.style import CleanStyle

from apogee.dashboard.history import Series

MAX_LINES = 8  # a chart with more lines shows the largest


def line_chart(title: str, series: Mapping[str, Series], *, height: int = 260) -> str:
    """An SVG line chart of ``series`` (name -> samples over time); "" when there is nothing."""
    named = [(name, s) for name, s in series.items() if s.points]
    if not named:
        return ""
    named.sort(key=lambda item: -max(v for _, v in item[1].points))
    chart = pygal.DateTimeLine(
        title=title,
        height=height,
        width=800,
        style=CleanStyle,
        show_dots=False,
        disable_xml_declaration=True,
        js=[],  # no tooltip script: the page stays static and loads nothing from outside
        x_label_rotation=20,
        x_value_formatter=lambda d: d.strftime("%H:%M:%S"),
        truncate_legend=40,
        legend_at_bottom=True,
    )
    for name, s in named[:MAX_LINES]:
        chart.add(name, [(dt.datetime.fromtimestamp(at), value) for at, value in s.points])
    svg = chart.render(is_unicode=True)
    return str(svg)
