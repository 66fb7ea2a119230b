"""Byte-code added to a worker archive: imported from it, traced to its source, done once.

The archives are small ones built here; a fresh interpreter imports from each
with the archive first on its path, as Spark's workers do.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from apogee.spark.worker_archive import (
    add_bytecode,
    has_bytecode,
    main,
    print_startup_hint,
    startup_hint,
    worker_archives,
)

MODULES = {
    "pkg/__init__.py": b"from pkg.inner import answer\n",
    "pkg/inner.py": (
        b"def answer():\n    return 42\n\ndef fail():\n    raise ValueError('from inner')\n"
    ),
    "pkg/broken.py": b"def (:\n",  # does not compile: keeps its source only
    "pkg/data.txt": b"not python",
}


def archive(tmp_path: Path) -> Path:
    path = tmp_path / "lib.zip"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in MODULES.items():
            zf.writestr(name, data)
    return path


def import_from(path: Path) -> dict[str, object]:
    """What a fresh interpreter with ``path`` first on its path sees of ``pkg``."""
    code = (
        "import json, traceback, pkg, pkg.inner\n"
        "try:\n    pkg.inner.fail()\n"
        "except ValueError as e:\n    where = traceback.extract_tb(e.__traceback__)[-1]\n"
        "print(json.dumps({'answer': pkg.answer(), 'file': pkg.inner.__file__,"
        " 'trace': [where.filename, where.line]}))"
    )
    env = {**os.environ, "PYTHONPATH": str(path), "PYTHONDONTWRITEBYTECODE": "1"}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env
    )
    result: dict[str, object] = json.loads(done.stdout)
    return result


def test_each_source_gets_a_pyc_that_the_interpreter_imports_and_traces_to_the_source(
    tmp_path: Path,
) -> None:
    path = archive(tmp_path)
    assert import_from(path)["file"] == f"{path}/pkg/inner.py"  # compiled at each import
    assert not has_bytecode(path)

    assert add_bytecode(path) == 2  # __init__ and inner; broken.py does not compile
    with zipfile.ZipFile(path) as zf:
        names = set(zf.namelist())
        assert names == set(MODULES) | {"pkg/__init__.pyc", "pkg/inner.pyc"}
        assert all(zf.read(name) == data for name, data in MODULES.items())
    seen = import_from(path)
    assert seen["answer"] == 42
    assert seen["file"] == f"{path}/pkg/inner.pyc"
    assert seen["trace"] == [f"{path}/pkg/inner.py", "raise ValueError('from inner')"]


def test_an_archive_with_this_interpreters_bytecode_is_left_alone(tmp_path: Path) -> None:
    path = archive(tmp_path)
    assert main([str(path)]) == 0
    assert has_bytecode(path)
    before = path.read_bytes()
    assert main([str(path)]) == 0
    assert path.read_bytes() == before


def test_bytecode_of_another_interpreter_is_replaced_and_never_breaks_an_import(
    tmp_path: Path,
) -> None:
    path = archive(tmp_path)
    add_bytecode(path)
    stale = tmp_path / "stale.zip"
    with zipfile.ZipFile(path) as src, zipfile.ZipFile(stale, "w") as dst:
        for info in src.infolist():
            data = src.read(info)
            if info.filename.endswith(".pyc"):
                # another version's magic number: zipimport must fall back to the source
                data = b"\x00\x00\r\n" + data[4:]
            dst.writestr(info, data)
    assert not has_bytecode(stale)
    assert import_from(stale)["file"] == f"{stale}/pkg/inner.py"
    assert add_bytecode(stale) == 2
    assert has_bytecode(stale)
    assert import_from(stale)["file"] == f"{stale}/pkg/inner.pyc"


def test_the_spark_commands_hint_at_the_command_while_an_archive_lacks_bytecode(
    tmp_path: Path,
) -> None:
    path = archive(tmp_path)
    hint = startup_hint([path])
    assert hint is not None and "lib.zip" in hint and "apogee.spark.worker_archive" in hint
    add_bytecode(path)
    assert startup_hint([path]) is None


def test_the_installed_pyspark_archive_is_found_and_make_gave_it_bytecode() -> None:
    names = [p.name for p in worker_archives()]
    assert "pyspark.zip" in names
    assert startup_hint() is None  # `make bytecode` ran before the tests


def test_print_startup_hint_prints_the_hint_to_stderr_only_when_there_is_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = archive(tmp_path)
    print_startup_hint([path])
    shown = capsys.readouterr()
    assert shown.out == "" and shown.err == f"{startup_hint([path])}\n"
    add_bytecode(path)
    print_startup_hint([path])
    assert capsys.readouterr() == ("", "")
