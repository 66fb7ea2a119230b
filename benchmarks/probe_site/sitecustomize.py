"""Installs ``loop_probe`` in a process a benchmark starts, when ``APOGEE_LOOP_PROBE`` names a file.

A benchmark that starts a server through ``apogee.testing.cluster`` (``python -m apogee``)
cannot call ``loop_probe.install`` inside it; it puts this directory and ``benchmarks/``
on the child's ``PYTHONPATH`` instead, and Python imports this module at start-up.
``APOGEE_LOOP_PROBE_LEVEL`` is the probe's level (``light`` by default).
"""

import os

_path = os.environ.get("APOGEE_LOOP_PROBE")
if _path:
    import loop_probe

    loop_probe.install(_path, os.environ.get("APOGEE_LOOP_PROBE_LEVEL", "light"))
