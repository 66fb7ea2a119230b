"""Apogee's own systems for the bench-peers harness (its ``BENCH_PEERS_EXTRA`` file).

Run from the harness folder, with this checkout installed there (``APOGEE_SRC``)::

    APOGEE_SRC=/path/to/apogee BENCH_PEERS_EXTRA=/path/to/apogee/benchmarks/peers_extra.py \\
        bash run.sh --systems apogee-client,apogee-py,redis-streams,rabbitmq-stream --skip-phys

The harness runs this file with ``servers`` (its server module) predefined. The
``apogee-client`` system runs ``apogee standalone`` like the harness's ``apogee-py``, in
the same server group, so both are measured against one server (listed first in
``--systems``, its server is the group's).

The server runs as ``make run`` runs it: from the checkout's own ``.venv`` (made by
``make``, on the interpreter the Makefile picks) when there is one, else from the
harness's. The clients, Apogee's and the peers', all run in the harness's ``.venv``.
"""

import os

HARNESS = servers  # noqa: F821  # predefined by the harness
HARNESS_VENV = os.path.join(os.path.dirname(os.path.abspath(HARNESS.__file__)), ".venv", "bin")
CHECKOUT = os.environ.get("APOGEE_SRC")
CHECKOUT_VENV = os.path.join(CHECKOUT, ".venv", "bin") if CHECKOUT else None
VENV = (
    CHECKOUT_VENV
    if CHECKOUT_VENV and os.path.exists(os.path.join(CHECKOUT_VENV, "apogee"))
    else HARNESS_VENV
)


def _standalone():
    return HARNESS.CommandServer(
        "apogee",
        [f"{VENV}/apogee", "standalone", "--store", "{workdir}", "--log-level", "WARNING"],
        port=10911,
        version_cmd=[
            f"{VENV}/python",
            "-c",
            "import importlib.metadata as m, sys;"
            " print('apogee', m.version('apogee'), 'on Python', sys.version.split()[0])",
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
