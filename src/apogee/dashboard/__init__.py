"""``apogee dashboard``: a web UI for operators (install with ``apogee[dashboard]``).

Server-rendered pages (Starlette, Jinja2) on the RocketMQ Dashboard's
layout: cluster, topics, consumers, messages, dead letters, producers.
Everything is read and done through ``apogee.admin`` (never the store),
so it works against any RocketMQ 4.x cluster. Charts are SVG drawn on the
server (pygal): the pages need no JavaScript.
"""
