from __future__ import annotations

from pathlib import Path

from apogee._util.fileio import read_json, write_json


def test_write_then_read_round_trips(tmp_path: Path) -> None:
    p = tmp_path / "config" / "topics.json"
    write_json(p, {"a": 1})
    write_json(p, {"a": 2})
    assert read_json(p) == {"a": 2}
    assert read_json(p.with_name("topics.json.bak")) == {"a": 1}
    assert not p.with_name("topics.json.tmp").exists()


def test_corrupt_main_file_falls_back_to_backup(tmp_path: Path) -> None:
    p = tmp_path / "kv.json"
    write_json(p, {"v": 1})
    write_json(p, {"v": 2})
    p.write_bytes(b'{"v": 3')  # torn write
    assert read_json(p) == {"v": 1}


def test_missing_file_gives_default(tmp_path: Path) -> None:
    assert read_json(tmp_path / "none.json", {"x": []}) == {"x": []}
