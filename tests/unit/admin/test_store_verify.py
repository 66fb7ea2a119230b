from __future__ import annotations

import hashlib
import struct
from pathlib import Path

import orjson
from click.testing import CliRunner

from apogee._util.clock import FakeClock
from apogee.cli.main import cli
from apogee.store.file_store import FileMessageStore
from apogee.store.segment import segment_name
from apogee.testing.store import message, small_config


def build(root: Path) -> list[int]:
    store = FileMessageStore.open(small_config(root), clock=FakeClock())
    offsets = []
    for i in range(40):
        r = store.put(message(queue_id=i % 4, body=b"body-%03d" % i, tags=f"t{i % 3}"))
        offsets.append(r.wrote_offset)
    store.put(message(topic="SCHEDULE_TOPIC_XXXX", queue_id=2, extra={"DELAY": "3"}))
    store.close()
    return offsets


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["admin", "store-verify", *args])
    return result.exit_code, result.output


def snapshot(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def test_a_clean_store_passes_and_is_left_untouched(tmp_path: Path) -> None:
    build(tmp_path)
    before = snapshot(tmp_path)
    code, out = run("--store", str(tmp_path))
    assert code == 0, out
    assert "41 records" in out and "result: consistent" in out
    code, out = run("--store", str(tmp_path), "--json")
    assert code == 0
    report = orjson.loads(out)
    assert report["consistent"] is True
    assert (report["records"], report["units"], report["consume_queues"]) == (41, 41, 5)
    assert report["commit_log_files"] >= 2 and report["blank_records"] >= 1
    assert snapshot(tmp_path) == before


def test_a_flipped_body_byte_is_reported_with_its_offset(tmp_path: Path) -> None:
    offsets = build(tmp_path)
    victim = offsets[25]
    seg_start = victim - victim % 4096
    path = tmp_path / "commitlog" / segment_name(seg_start)
    data = bytearray(path.read_bytes())
    data[victim - seg_start + 88] ^= 0x01  # first body byte
    path.write_bytes(bytes(data))
    code, out = run("--store", str(tmp_path), "--json")
    assert code == 1
    report = orjson.loads(out)
    first = report["inconsistencies"][0]
    assert first["where"] == "commitlog"
    assert first["offset"] == victim
    assert "CRC" in first["problem"]
    code, text = run("--store", str(tmp_path))
    assert code == 1 and f"offset {victim}" in text


def test_a_consume_queue_unit_pointing_wrong_is_reported(tmp_path: Path) -> None:
    build(tmp_path)
    path = tmp_path / "consumequeue" / "TopicTest" / "1" / segment_name(0)
    data = bytearray(path.read_bytes())
    phys, size, code = struct.unpack_from(">qiq", data, 20)  # logical offset 1
    struct.pack_into(">qiq", data, 20, phys, size + 1, code)
    path.write_bytes(bytes(data))
    code_, out = run("--store", str(tmp_path), "--json")
    assert code_ == 1
    first = orjson.loads(out)["inconsistencies"][0]
    assert first["where"] == "consumequeue/TopicTest/1"
    assert first["offset"] == 1 and "size" in first["problem"]


def test_a_preallocated_empty_file_after_a_crash_is_not_an_error(tmp_path: Path) -> None:
    build(tmp_path)
    files = sorted((tmp_path / "commitlog").iterdir())
    nxt = int(files[-1].name) + 4096
    (tmp_path / "commitlog" / segment_name(nxt)).write_bytes(bytes(4096))
    code, out = run("--store", str(tmp_path))
    assert code == 0, out
