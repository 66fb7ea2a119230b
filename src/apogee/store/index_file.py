"""One IndexFile: a memory-mapped hash table from message keys to commit-log offsets.

Owns: RocketMQ's index-file layout, putting keys (one, or a dispatch
step's worth through ``put_work``, which runs ``apogee.store.kernels.index_put``)
and walking one key's chain. Rolling,
naming, retention and locking belong to ``index_service``.

Layout (big-endian; S = hash slots, N = entries)::

    offset        size  field
    0             8     beginTimestamp  int64  store time (ms) of entry 1
    8             8     endTimestamp    int64  newest store time (ms)
    16            8     beginPhyOffset  int64  commit-log offset of entry 1
    24            8     endPhyOffset    int64  commit-log offset of the newest entry
    32            4     hashSlotCount   int32  slots that are not empty
    36            4     indexCount      int32  next entry number; starts at 1
    40            4*S   slot[s]         int32  newest entry number in slot s, 0 = empty
    40+4*S        20*N  entry[n]:
                          +0   4  keyHash    int32  abs(String.hashCode(key)), MIN_VALUE -> 0
                          +4   8  phyOffset  int64
                          +12  4  timeDiff   int32  (storeTime - beginTimestamp) // 1000,
                                                     clamped to [0, 2^31 - 1]
                          +16  4  prevIndex  int32  older entry of the same slot, 0 = none

Invariants: entry 0 is never written, so a file holds N - 1 keys; a chain
link always points to a smaller entry number (a walk stops at anything
else, so a damaged file cannot loop); an entry is reachable only after it
and the header are written (see ``put_hash``). Lookups match on the 31-bit
key hash only: two keys with equal hashes both come back, and the caller
compares the stored record's keys, as RocketMQ does. Not thread-safe; the
service serialises access.
"""

from __future__ import annotations

import mmap
import os
import struct
import sys
from pathlib import Path
from types import TracebackType

from apogee._util.fileio import fsync_dir
from apogee.errors import StoreCorruptionError
from apogee.model.javahash import java_string_hash_uncached
from apogee.store.kernels import index_put
from apogee.store.segment import has_holes, reserve

HEADER_SIZE = 40
SLOT_SIZE = 4
ENTRY_SIZE = 20
INVALID_INDEX = 0
TMP_SUFFIX = ".tmp"
DEFAULT_HASH_SLOT_NUM = 5_000_000
DEFAULT_INDEX_NUM = 20_000_000
_INT32_MAX = 2**31 - 1

_HEADER = struct.Struct(">qqqqii")
_SLOT = struct.Struct(">i")
_ENTRY = struct.Struct(">iqii")
assert _HEADER.size == HEADER_SIZE
assert _SLOT.size == SLOT_SIZE
assert _ENTRY.size == ENTRY_SIZE

_pack_header = _HEADER.pack_into
_unpack_header = _HEADER.unpack_from
_pack_slot = _SLOT.pack_into
_unpack_slot = _SLOT.unpack_from
_pack_entry = _ENTRY.pack_into
_unpack_entry = _ENTRY.unpack_from

#: Records to index: (commit-log offset, store time, hashes of its keys), in log order.
IndexWork = list[tuple[int, int, list[int]]]


def file_size(hash_slot_num: int, index_num: int) -> int:
    """Bytes of an index file with the given slot and entry counts."""
    return HEADER_SIZE + hash_slot_num * SLOT_SIZE + index_num * ENTRY_SIZE


def index_key_hash(key: str) -> int:
    """RocketMQ's index hash: ``abs(key.hashCode())``, and 0 for MIN_VALUE."""
    h = java_string_hash_uncached(key)
    if h >= 0:
        return h
    # Java's Math.abs(MIN_VALUE) overflows to a negative number, mapped to 0.
    return 0 if h == -(2**31) else -h


def _check_sizes(hash_slot_num: int, index_num: int) -> None:
    if not 0 < hash_slot_num <= _INT32_MAX:
        raise ValueError(f"hash_slot_num must be in [1, 2^31 - 1], got {hash_slot_num}")
    if not 2 <= index_num <= _INT32_MAX:
        raise ValueError(f"index_num must be in [2, 2^31 - 1], got {index_num}")


def _map(path: Path, size: int) -> tuple[int, mmap.mmap]:
    """Open and map ``path`` read-write, its ``size`` bytes reserved on disk first.

    A new file is all zeros, which is what empty slots and entries read as;
    its blocks are allocated before it is mapped (see ``segment.reserve``:
    a write to a sparse page on a full disk is a SIGBUS). An existing file
    with holes (made sparse elsewhere) is filled in the same way.

    Slots are found by hash and entries by chain: no fault reads around it
    (each would zero-fill or read read_ahead_kb, 8 MiB on a virtio disk, on
    the event loop: 20 to 30 ms per fault measured on a new file).
    """
    fd = os.open(path, os.O_RDWR)
    try:
        if os.fstat(fd).st_size != size or has_holes(fd, size):
            reserve(fd, size, path)
        mm = mmap.mmap(fd, 0)
        mm.madvise(mmap.MADV_RANDOM)
        return fd, mm
    except BaseException:
        os.close(fd)
        raise


# mmap.flush() (msync) holds the GIL for the whole write-back, stalling every
# other thread, the event loop included. On Linux, fdatasync writes back pages
# dirtied through a shared mapping as well, and releases the GIL.
_SYNC_THROUGH_FD = sys.platform.startswith("linux")


class IndexFile:
    """One mapped index file; build it with :meth:`create` or :meth:`open`."""

    __slots__ = (
        "_begin_phy",
        "_begin_ts",
        "_dirty",
        "_end_phy",
        "_end_ts",
        "_entries_pos",
        "_fd",
        "_index_count",
        "_index_num",
        "_mm",
        "_slot_count",
        "_slot_num",
        "path",
    )

    def __init__(
        self, path: Path, fd: int, mm: mmap.mmap, hash_slot_num: int, index_num: int
    ) -> None:
        self.path = path
        self._fd = fd
        self._mm = mm
        self._slot_num = hash_slot_num
        self._index_num = index_num
        self._entries_pos = HEADER_SIZE + hash_slot_num * SLOT_SIZE
        fields: tuple[int, int, int, int, int, int] = _unpack_header(mm, 0)
        self._begin_ts: int = fields[0]
        self._end_ts: int = fields[1]
        self._begin_phy: int = fields[2]
        self._end_phy: int = fields[3]
        self._slot_count: int = fields[4]
        # RocketMQ leaves indexCount 0 on disk until the first put; 0 means 1.
        self._index_count: int = max(fields[5], 1)
        self._dirty = False

    @classmethod
    def create(
        cls,
        path: Path,
        *,
        hash_slot_num: int = DEFAULT_HASH_SLOT_NUM,
        index_num: int = DEFAULT_INDEX_NUM,
        end_phy_offset: int = 0,
        end_timestamp: int = 0,
    ) -> IndexFile:
        """Create a new, empty file at ``path`` (which must not exist).

        ``end_phy_offset`` / ``end_timestamp`` carry the previous file's end,
        so the service's skip-below-end rule keeps working across a roll.
        """
        _check_sizes(hash_slot_num, index_num)
        if path.exists():
            raise FileExistsError(path)
        # Sized and headed under a temporary name, so a crash never leaves a
        # short file under a real name; the service removes such leftovers.
        tmp = path.with_name(path.name + TMP_SUFFIX)
        tmp.write_bytes(b"")
        try:
            fd, mm = _map(tmp, file_size(hash_slot_num, index_num))
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        try:
            _pack_header(mm, 0, end_timestamp, end_timestamp, end_phy_offset, end_phy_offset, 0, 1)
            os.replace(tmp, path)
            fsync_dir(path.parent)
        except BaseException:
            mm.close()
            os.close(fd)
            tmp.unlink(missing_ok=True)
            raise
        f = cls(path, fd, mm, hash_slot_num, index_num)
        f._dirty = True
        return f

    @classmethod
    def open(
        cls,
        path: Path,
        *,
        hash_slot_num: int = DEFAULT_HASH_SLOT_NUM,
        index_num: int = DEFAULT_INDEX_NUM,
    ) -> IndexFile:
        """Map an existing file; its size must match the configured counts."""
        _check_sizes(hash_slot_num, index_num)
        expected = file_size(hash_slot_num, index_num)
        actual = path.stat().st_size
        if actual != expected:
            raise StoreCorruptionError(
                f"index file {path}: size {actual}, expected {expected} for "
                f"{hash_slot_num} slots and {index_num} entries"
            )
        f = cls(path, *_map(path, expected), hash_slot_num, index_num)
        if f._index_count > index_num:
            count = f._index_count
            f.close()
            raise StoreCorruptionError(
                f"index file {path}: index count {count} exceeds capacity {index_num}"
            )
        return f

    # -- header ------------------------------------------------------------

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def begin_timestamp(self) -> int:
        return self._begin_ts

    @property
    def end_timestamp(self) -> int:
        return self._end_ts

    @property
    def begin_phy_offset(self) -> int:
        return self._begin_phy

    @property
    def end_phy_offset(self) -> int:
        return self._end_phy

    @property
    def hash_slot_count(self) -> int:
        return self._slot_count

    @property
    def index_count(self) -> int:
        """Next entry number: the number of keys held plus one."""
        return self._index_count

    @property
    def is_full(self) -> bool:
        return self._index_count >= self._index_num

    @property
    def size(self) -> int:
        return file_size(self._slot_num, self._index_num)

    def is_time_matched(self, begin: int, end: int) -> bool:
        """Whether [begin, end] (ms) overlaps this file's [begin, end] timestamps."""
        first, last = self._begin_ts, self._end_ts
        return (begin < first and end > last) or first <= begin <= last or first <= end <= last

    # -- write ---------------------------------------------------------------

    def put_key(self, key: str, phy_offset: int, store_timestamp: int) -> bool:
        """Index ``key`` at ``phy_offset``; False when the file is full."""
        return self.put_hash(index_key_hash(key), phy_offset, store_timestamp)

    def put_hash(self, key_hash: int, phy_offset: int, store_timestamp: int) -> bool:
        """:meth:`put_key` with the key already hashed by :func:`index_key_hash`."""
        number = self._index_count
        if number >= self._index_num:
            return False
        mm = self._mm
        slot_pos = HEADER_SIZE + (key_hash % self._slot_num) * SLOT_SIZE
        prev: int = _unpack_slot(mm, slot_pos)[0]
        if prev <= INVALID_INDEX or prev >= number:
            prev = INVALID_INDEX
            self._slot_count += 1
        if number == 1:
            # RocketMQ computes entry 1's diff against the inherited begin and
            # then moves begin; moving first stores the true time (diff 0).
            self._begin_ts = store_timestamp
            self._begin_phy = phy_offset
        begin = self._begin_ts
        diff = (store_timestamp - begin) // 1000 if begin > 0 else 0
        if diff < 0:
            diff = 0
        elif diff > _INT32_MAX:
            diff = _INT32_MAX
        # Write order makes a torn put harmless: the entry is unreachable until
        # the header counts it and the slot points at it.
        _pack_entry(mm, self._entries_pos + number * ENTRY_SIZE, key_hash, phy_offset, diff, prev)
        self._index_count = number + 1
        self._end_phy = phy_offset
        # The newest time rather than RocketMQ's last one: a clock stepping back
        # must not shrink the range that queries and recovery compare against.
        if store_timestamp > self._end_ts:  # noqa: PLR1730 - no max() call per put
            self._end_ts = store_timestamp
        _pack_header(
            mm,
            0,
            begin,
            self._end_ts,
            self._begin_phy,
            phy_offset,
            self._slot_count,
            number + 1,
        )
        _pack_slot(mm, slot_pos, number)
        self._dirty = True
        return True

    def put_work(self, work: IndexWork, rec: int, key: int) -> tuple[int, int]:
        """Put ``work`` from record ``rec``, key ``key`` on, until done or full.

        A record at or below the file's end offset was indexed already (see
        :meth:`already_indexed`) and is skipped; that is checked before its
        first key only, since a record may continue from a full file.
        Returns where it stopped: ``(len(work), 0)`` when all is in.
        """
        count = self._index_count
        (rec, key, self._begin_ts, self._end_ts, self._begin_phy, self._end_phy,
         self._slot_count, self._index_count) = index_put(
            self._mm, self._slot_num, self._index_num, self._begin_ts, self._end_ts,
            self._begin_phy, self._end_phy, self._slot_count, count, work, rec, key,
        )  # fmt: skip
        if self._index_count != count:
            self._dirty = True
        return rec, key

    def already_indexed(self, offset: int) -> bool:
        """Whether the record at ``offset`` is in this file or an older one."""
        # Equal to the end means the record was indexed (maybe split across this
        # file and the previous one) unless this file has no entry yet.
        end = self._end_phy
        return offset < end or (offset == end and self._index_count > 1)

    # -- read ----------------------------------------------------------------

    def select_phy_offsets(self, key: str, max_num: int, begin_ts: int, end_ts: int) -> list[int]:
        """Offsets indexed under ``key`` with a time in [begin_ts, end_ts], newest first.

        Entries whose key merely hashes equal come back too (see the module
        docstring). Times are whole seconds after ``begin_timestamp``.
        """
        out: list[int] = []
        self.select_by_hash(index_key_hash(key), max_num, begin_ts, end_ts, out)
        return out

    def select_by_hash(
        self, key_hash: int, max_num: int, begin_ts: int, end_ts: int, out: list[int]
    ) -> None:
        """Append matches to ``out`` until it holds ``max_num`` offsets."""
        count = self._index_count
        if count <= 1 or len(out) >= max_num:
            return
        mm = self._mm
        number: int = _unpack_slot(mm, HEADER_SIZE + (key_hash % self._slot_num) * SLOT_SIZE)[0]
        if number <= INVALID_INDEX or number >= count:
            return
        base, file_begin = self._entries_pos, self._begin_ts
        while len(out) < max_num:
            stored_hash, phy, diff, prev = _unpack_entry(mm, base + number * ENTRY_SIZE)
            if diff < 0:
                break
            when = file_begin + diff * 1000
            if stored_hash == key_hash and begin_ts <= when <= end_ts:
                out.append(phy)
            if prev <= INVALID_INDEX or prev >= number or when < begin_ts:
                break
            number = prev

    # -- lifecycle -------------------------------------------------------------

    def flush(self) -> None:
        """Force written pages to disk; a no-op when nothing changed."""
        if self._dirty:
            self._dirty = False  # cleared first: a put racing the sync re-marks it
            if _SYNC_THROUGH_FD:
                os.fdatasync(self._fd)
            else:
                self._mm.flush()

    def close(self) -> None:
        """Flush and unmap; the file stays on disk."""
        if self._mm.closed:
            return
        try:
            self.flush()
        finally:
            self._release()

    def destroy(self) -> None:
        """Unmap without flushing and delete the file."""
        if not self._mm.closed:
            self._release()
        self.path.unlink(missing_ok=True)

    def _release(self) -> None:
        self._mm.close()
        os.close(self._fd)

    @property
    def closed(self) -> bool:
        return self._mm.closed

    def __enter__(self) -> IndexFile:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return (
            f"IndexFile({self.path.name}, keys={self._index_count - 1}, "
            f"phy=[{self._begin_phy}, {self._end_phy}], ts=[{self._begin_ts}, {self._end_ts}])"
        )
