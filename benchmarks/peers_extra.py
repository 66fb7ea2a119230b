"""Apogee's own systems for the bench-peers harness (its ``BENCH_PEERS_EXTRA`` file).

Run from the harness folder, with this checkout installed there (``APOGEE_SRC``)::

    APOGEE_SRC=/path/to/apogee BENCH_PEERS_EXTRA=/path/to/apogee/benchmarks/peers_extra.py \\
        bash run.sh --systems apogee-client,apogee-py,redis-streams,rabbitmq-stream --skip-phys

The harness runs this file with ``servers`` (its server module) predefined. The
``apogee-client`` system runs ``apogee standalone`` like the harness's ``apogee-py``, in
the same server group, so both are measured against one server.
"""

import os

HARNESS = servers  # noqa: F821  # predefined by the harness
VENV = os.path.join(os.path.dirname(os.path.abspath(HARNESS.__file__)), ".venv", "bin")


def _standalone():
    return HARNESS.CommandServer(
        "apogee",
        [f"{VENV}/apogee", "standalone", "--store", "{workdir}", "--log-level", "WARNING"],
        port=10911,
        version_cmd=[
            f"{VENV}/python",
            "-c",
            "import importlib.metadata as m; print('apogee', m.version('apogee'))",
        ],
        extra={"namesrv": "127.0.0.1:9876"},
    )


# The harness compiles this file under its own path but defines no __file__.
HERE = os.path.dirname(os.path.abspath(_standalone.__code__.co_filename))

SYSTEMS = {
    "apogee-client": {
        "server": _standalone,
        "server_group": "apogee",
        "adapter": os.path.join(HERE, "peers_apogee_client.py"),
        "clients": ["apogee"],
    },
}
