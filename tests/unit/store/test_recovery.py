from __future__ import annotations

import os
import random
import shutil
import struct
from pathlib import Path

import pytest

from apogee._util.clock import FakeClock
from apogee.errors import StoreInUseError
from apogee.model.message_codec import decode_record
from apogee.store.config import StoreConfig
from apogee.store.file_store import FileMessageStore
from apogee.store.segment import segment_name
from apogee.testing.store import expected_queues, message, queue_units, small_config

Record = tuple[int, int]  # (commit-log offset, size)


def build(root: Path) -> tuple[StoreConfig, list[Record]]:
    """A cleanly closed store of ~3 small files with records in 3 queues."""
    config = small_config(root)
    clock = FakeClock()
    store = FileMessageStore.open(config, clock=clock)
    records: list[Record] = []
    for i in range(70):
        r = store.put(message(queue_id=i % 3, body=b"b%02d" % i, tags=f"t{i % 2}", uniq=f"u{i}"))
        assert r.ok
        records.append((r.wrote_offset, r.wrote_bytes))
        clock.advance(0.01)
    store.dispatch_step(1000)
    store.close()
    assert records[-1][0] >= 2 * 4096  # the last records live in the third file
    return config, records


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Record]]:
    root = tmp_path_factory.mktemp("pristine")
    _, records = build(root)
    return root, records


def fresh_copy(pristine: Path, dest: Path, *, crashed: bool) -> StoreConfig:
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(pristine, dest)
    if crashed:
        (dest / "abort").write_text("12345")
    return small_config(dest)


def check_store(config: StoreConfig, kept: list[Record], end: int | None = None) -> None:
    """Reopen: every kept record is there, nothing more, queues match the log.

    ``end`` is where the log must now end (by default right after the last kept
    record; after a blank end record it is the start of the next file).
    """
    store = FileMessageStore.open(config, clock=FakeClock())
    try:
        end = kept[-1][0] + kept[-1][1] if end is None else end
        assert store.commit_log.max_offset == end
        for off, size in kept[-3:]:
            view = store.read_message(off)
            assert view is not None and len(view) == size
            view.release()
        units = queue_units(store.queues)
        assert units == expected_queues(config)
        assert sum(len(u) for u in units.values()) == len(kept)
        table = {k: len(v) for k, v in units.items()}
        assert store.commit_log.topic_queue_table == table
        r = store.put(message(queue_id=0, body=b"after"))
        assert r.wrote_offset == end
        assert r.queue_offset == table[("TopicTest", 0)]
    finally:
        store.close()


@pytest.mark.parametrize("crashed", [False, True], ids=["clean-exit", "crashed"])
def test_torn_tail_at_every_byte_of_the_last_two_records(
    pristine: tuple[Path, list[Record]], tmp_path: Path, crashed: bool
) -> None:
    root, records = pristine
    original = (root / "commitlog" / segment_name(2 * 4096)).read_bytes()
    first = records[-2][0]
    end = records[-1][0] + records[-1][1]
    for cut in range(first, end + 1):
        config = fresh_copy(root, tmp_path / "s", crashed=crashed)
        seg_path = config.commit_log_dir / segment_name(2 * 4096)
        os.truncate(seg_path, cut - 2 * 4096)
        kept = [r for r in records if r[0] + r[1] <= cut]
        check_store(config, kept)
        torn_start = kept[-1][0] + kept[-1][1]
        expected_torn = original[torn_start - 8192 : cut - 8192].rstrip(b"\0")
        torn = sorted(config.torn_dir.glob("*.bin")) if config.torn_dir.exists() else []
        if expected_torn:
            assert len(torn) == 1, cut
            assert torn[0].name.startswith(segment_name(torn_start))
            assert torn[0].read_bytes() == expected_torn
        else:
            assert torn == []


@pytest.mark.parametrize("crashed", [False, True], ids=["clean-exit", "crashed"])
@pytest.mark.parametrize("kind", ["random", "record-like"])
def test_garbage_after_the_last_record_is_set_aside(
    pristine: tuple[Path, list[Record]], tmp_path: Path, crashed: bool, kind: str
) -> None:
    root, records = pristine
    config = fresh_copy(root, tmp_path / "s", crashed=crashed)
    end = records[-1][0] + records[-1][1]
    rng = random.Random(7)
    garbage = bytes(rng.randrange(1, 256) for _ in range(300))
    if kind == "record-like":  # a plausible header over garbage: fails on the CRC or size
        garbage = struct.pack(">ii", 120, -626843481) + garbage[8:120]
    seg_path = config.commit_log_dir / segment_name(2 * 4096)
    with open(seg_path, "r+b") as f:
        f.seek(end - 2 * 4096)
        f.write(garbage)
    check_store(config, records)  # also appends one record of 105 bytes at the end
    (torn,) = config.torn_dir.glob("*.bin")
    assert torn.read_bytes() == garbage.rstrip(b"\0")
    rest = seg_path.read_bytes()[end - 8192 + 105 : end - 8192 + len(garbage)]
    assert rest == bytes(len(rest))  # the garbage was zeroed


def test_a_corrupt_record_in_the_middle_ends_the_log_and_the_rest_is_kept_aside(
    pristine: tuple[Path, list[Record]], tmp_path: Path
) -> None:
    root, records = pristine
    config = fresh_copy(root, tmp_path / "s", crashed=False)
    victim = next(r for r in records if r[0] >= 4096)  # first record of the 2nd file
    path = config.commit_log_dir / segment_name(4096)
    data = bytearray(path.read_bytes())
    data[victim[0] - 4096 + victim[1] - 30] ^= 0xFF  # inside its body: CRC fails
    path.write_bytes(bytes(data))
    kept = [r for r in records if r[0] < victim[0]]
    check_store(config, kept, end=victim[0])
    names = sorted(p.name for p in config.torn_dir.iterdir())
    assert names[0].startswith(segment_name(victim[0]))  # rest of file 2, copied
    assert names[1].startswith(segment_name(2 * 4096)) and names[1].endswith(".segment")


def test_crash_restores_consume_queue_units_that_were_lost(
    pristine: tuple[Path, list[Record]], tmp_path: Path
) -> None:
    root, records = pristine
    config = fresh_copy(root, tmp_path / "s", crashed=True)
    qdir = config.consume_queue_dir / "TopicTest" / "1"
    last = sorted(qdir.iterdir())[-1]
    data = bytearray(last.read_bytes())
    data[40:] = bytes(len(data) - 40)  # as if the last units never reached the disk
    last.write_bytes(bytes(data))
    check_store(config, records)


def test_consume_queues_are_rebuilt_when_missing(
    pristine: tuple[Path, list[Record]], tmp_path: Path
) -> None:
    root, records = pristine
    config = fresh_copy(root, tmp_path / "s", crashed=False)
    shutil.rmtree(config.consume_queue_dir)
    check_store(config, records)


def test_without_commit_log_files_consume_queues_are_dropped(
    pristine: tuple[Path, list[Record]], tmp_path: Path
) -> None:
    root, _ = pristine
    config = fresh_copy(root, tmp_path / "s", crashed=True)
    shutil.rmtree(config.commit_log_dir)
    store = FileMessageStore.open(config, clock=FakeClock())
    assert store.topics() == {}
    assert store.commit_log.max_offset == 0
    store.close()


def test_abort_file_marks_an_unclean_exit(tmp_path: Path) -> None:
    config = small_config(tmp_path)
    store = FileMessageStore.open(config)
    assert config.abort_path.read_text() == str(os.getpid())
    assert store.recovery is not None and store.recovery.last_exit_ok
    store.close()
    assert not config.abort_path.exists()
    config.abort_path.write_text("1")
    again = FileMessageStore.open(config)
    assert again.recovery is not None and not again.recovery.last_exit_ok
    again.close()


def test_a_store_cannot_be_opened_twice(tmp_path: Path) -> None:
    config = small_config(tmp_path)
    store = FileMessageStore.open(config)
    with pytest.raises(StoreInUseError, match="in use") as refused:
        FileMessageStore.open(config)
    assert refused.value.pid == os.getpid()  # the holder is named
    store.close()


def test_recovered_records_decode_as_written(
    pristine: tuple[Path, list[Record]], tmp_path: Path
) -> None:
    root, records = pristine
    config = fresh_copy(root, tmp_path / "s", crashed=True)
    store = FileMessageStore.open(config)
    for i, (off, _) in enumerate(records):
        msg = store.look_message(off)
        assert msg is not None
        assert (msg.body, msg.queue_id, msg.uniq_key) == (b"b%02d" % i, i % 3, f"u{i}")
    view = store.read_message(records[5][0])
    assert view is not None
    assert decode_record(view).queue_offset == 1
    view.release()
    store.close()
