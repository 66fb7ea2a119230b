"""Byte-code for the archives PySpark puts first on its Python workers' path.

Owns: adding compiled modules to ``pyspark/python/lib/*.zip`` of the PySpark
installation (``add_bytecode``), the hint the Spark commands print while they
lack it (``startup_hint``, ``print_startup_hint``), and the command that adds it::

    python -m apogee.spark.worker_archive

Spark starts every Python process of a query (the executors' workers, and
for a Python data source the lookup, planning, writing and streaming
runners) with ``$SPARK_HOME/python/lib/pyspark.zip`` ahead of site-packages,
so they import PySpark from that archive. PyPI's archive holds sources only,
and Python never writes byte-code into a zip: each such process compiles
every PySpark module it imports, about 1.2 s of CPU on a 2-core machine
(importing ``pyspark.worker`` and the data source API: 1.4-1.7 s from the
archive, 0.3-0.5 s with this byte-code, 0.25 s from site-packages).

Each ``name.py`` of the archive gets a ``name.pyc`` beside it, where
``zipimport`` looks for it. The pyc is hash-based and unchecked (PEP 552),
so no time stamp has to agree with the archive's; the archive is rewritten
whole, from its own sources, so the two cannot drift apart. The code is
compiled for this interpreter: another version finds a magic number it does
not know, and ``zipimport`` falls back to the source beside it.

A pyc, as written here (little-endian)::

    0        4         8                  16
    +--------+---------+------------------+----------------------+
    | magic  | flags=1 | source hash      | marshalled code ...  |
    +--------+---------+------------------+----------------------+
      MAGIC_NUMBER       importlib.util.source_hash(source)
                flags bit 0: hash-based; bit 1 (check source): 0
"""

from __future__ import annotations

import argparse
import importlib.util
import marshal
import os
import struct
import sys
import tempfile
import warnings
import zipfile
from pathlib import Path

#: a hash-based pyc whose source is never read to check it
_UNCHECKED_HASH = 0b01


def pyc_bytes(source: bytes, filename: str) -> bytes:
    """The unchecked hash-based pyc of ``source``; SyntaxError when it does not compile."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the archive's own tests hold a few SyntaxWarnings
        code = compile(source, filename, "exec", dont_inherit=True)
    header = importlib.util.MAGIC_NUMBER + struct.pack("<I", _UNCHECKED_HASH)
    return header + importlib.util.source_hash(source) + marshal.dumps(code)


def has_bytecode(archive: Path) -> bool:
    """Whether ``archive`` already holds pycs of this interpreter."""
    with zipfile.ZipFile(archive) as zf:
        for info in zf.infolist():
            if info.filename.endswith(".pyc"):
                return zf.read(info)[:4] == importlib.util.MAGIC_NUMBER
    return False


def add_bytecode(archive: Path) -> int:
    """Rewrite ``archive`` with a pyc beside each source; the number of pycs written.

    Pycs already there (of another interpreter) are dropped first; a source
    that does not compile keeps no pyc. The rewrite goes to a file beside
    the archive and replaces it in one rename, so a worker starting meanwhile
    reads either archive whole.
    """
    written = 0
    fd, tmp = tempfile.mkstemp(prefix=archive.name + ".", suffix=".tmp", dir=archive.parent)
    os.close(fd)
    try:
        with zipfile.ZipFile(archive) as src, zipfile.ZipFile(tmp, "w") as dst:
            for info in src.infolist():
                if info.filename.endswith(".pyc"):
                    continue
                data = src.read(info)
                dst.writestr(info, data)
                if not info.filename.endswith(".py"):
                    continue
                try:
                    # the name zipimport gives the source's code, for tracebacks
                    pyc = pyc_bytes(data, os.path.join(archive, info.filename))
                except SyntaxError:
                    continue
                entry = zipfile.ZipInfo(info.filename + "c", info.date_time)
                entry.compress_type = zipfile.ZIP_DEFLATED
                entry.external_attr = info.external_attr
                dst.writestr(entry, pyc)
                written += 1
        os.chmod(tmp, archive.stat().st_mode & 0o7777)
        os.replace(tmp, archive)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return written


def worker_archives() -> list[Path]:
    """The archives of the installed PySpark that its workers import from."""
    spec = importlib.util.find_spec("pyspark")  # finds it without importing it
    if spec is None or not spec.submodule_search_locations:
        return []
    lib = Path(next(iter(spec.submodule_search_locations)), "python", "lib")
    return sorted(lib.glob("*.zip"))


def startup_hint(archives: list[Path] | None = None) -> str | None:
    """A line for a command about to start Spark when the workers' archives (default: the
    installed PySpark's) lack byte-code."""
    missing = [a for a in (worker_archives() if archives is None else archives)
               if not has_bytecode(a)]  # fmt: skip
    if not missing:
        return None
    return (
        f"note: {missing[0].name} has no byte-code, so each Python worker Spark starts "
        "compiles PySpark first (about a second of CPU); "
        "`python -m apogee.spark.worker_archive` adds it once"
    )


def print_startup_hint(archives: list[Path] | None = None) -> None:
    """Print ``startup_hint(archives)`` to stderr, if there is one (the Spark commands call
    this before they start Spark)."""
    hint = startup_hint(archives)
    if hint is not None:
        print(hint, file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m apogee.spark.worker_archive",
        description="Add byte-code to the archives PySpark's Python workers import from.",
    )
    parser.add_argument(
        "archives", nargs="*", type=Path, help="zip files (default: the installed PySpark's)"
    )
    args = parser.parse_args(argv)
    archives: list[Path] = args.archives or worker_archives()
    if not archives:
        print("no PySpark installation found", file=sys.stderr)
        return 1
    for archive in archives:
        if has_bytecode(archive):
            print(f"{archive}: has byte-code already")
        else:
            print(f"{archive}: {add_bytecode(archive)} modules compiled")
    return 0


if __name__ == "__main__":
    sys.exit(main())
