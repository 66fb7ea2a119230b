"""One fixed-size, preallocated, memory-mapped file of a log.

Owns: creating, mapping, syncing, zeroing and deleting one segment file; the
file name is the segment's 20-digit zero-padded start offset. Knows nothing
about messages.

Invariants:
- the file is ``size`` bytes long and its blocks are allocated up front
  (``posix_fallocate``), so a full disk shows at creation and never as a
  SIGBUS on a later write into the mapping;
- ``wrote`` (bytes appended) never decreases except through ``truncate_to``;
  ``flushed <= wrote``;
- bytes reach the file through the mapping or by ``pwrite`` on ``fd``
  (SYNC_FLUSH; see ``apogee.store.commitlog``): one page cache, one view;
- data is made durable by ``msync(MS_SYNC)`` of the written range, called
  through ctypes, which releases the GIL (``mmap.flush`` holds it); where
  that is not available, by ``fdatasync`` of the file. The range matters:
  pages populated ahead of the writer are dirty zeros, and a whole-file sync
  would write them out and write-protect them, so that the writer then takes
  a fault per page anyway;
- pages are populated ahead of the writer by ``madvise`` called through
  ctypes, which releases the GIL (``mmap.madvise`` holds it for the whole
  populate, milliseconds for a few MiB, stalling the event loop);
- ``close`` waits until no such GIL-free call uses the mapping;
- a segment whose memory is still exported (readers hold memoryviews) cannot
  be unmapped; ``close`` then reports False and the owner retries later.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import mmap
import os
import struct
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

from apogee.errors import DiskFullError, StoreCorruptionError, StoreError

NAME_DIGITS = 20
_ZERO_CHUNK = bytes(1 << 20)
MADV_POPULATE_WRITE = 23  # Linux 5.14+; the mmap module does not name it
# Whether the kernel takes MADV_POPULATE_WRITE; cleared at the first refusal.
_POPULATE = {"ok": sys.platform == "linux"}


def can_populate() -> bool:
    """Whether pages can be populated ahead (False once the kernel refused it)."""
    return _POPULATE["ok"]


MS_SYNC = 4  # Linux <sys/mman.h>
PAGE_SIZE = mmap.PAGESIZE


# FS_IOC_FIEMAP (<linux/fiemap.h>): the extent map of a file.
#
#   struct fiemap (32 bytes)            struct fiemap_extent (56 bytes)
#   +0  u64 fm_start                    +0  u64 fe_logical
#   +8  u64 fm_length                   +8  u64 fe_physical
#   +16 u32 fm_flags (in)               +16 u64 fe_length
#   +20 u32 fm_mapped_extents (out)     +24 u64 fe_reserved64[2]
#   +24 u32 fm_extent_count (in)        +40 u32 fe_flags
#   +28 u32 fm_reserved                 +44 u32 fe_reserved[3]
#   +32 struct fiemap_extent fm_extents[fm_extent_count]
FS_IOC_FIEMAP = 0xC020660B
FIEMAP_FLAG_SYNC = 0x1  # write dirty pages back first, so the map is current
FIEMAP_EXTENT_LAST = 0x1
FIEMAP_EXTENT_UNWRITTEN = 0x800  # allocated, never written: reads as zeros
_FIEMAP_HEAD = struct.Struct("=QQIIII")
_FIEMAP_EXTENT = struct.Struct("=QQQ16xI12x")
_FIEMAP_BATCH = 128


def written_extents(fd: int, begin: int, end: int) -> list[tuple[int, int]] | None:
    """The ``[start, stop)`` ranges of ``[begin, end)`` whose blocks were ever written
    (or that the file system cannot vouch for); None when it has no extent map.

    Holes and unwritten extents (reserved by fallocate) are left out: both read
    as zeros. Dirty pages are written back first (FIEMAP_FLAG_SYNC), so bytes
    still only in the page cache count as written.
    """
    if sys.platform != "linux":
        return None
    found: list[tuple[int, int]] = []
    pos = begin
    flags = FIEMAP_FLAG_SYNC
    while pos < end:
        buf = bytearray(_FIEMAP_HEAD.size + _FIEMAP_BATCH * _FIEMAP_EXTENT.size)
        _FIEMAP_HEAD.pack_into(buf, 0, pos, end - pos, flags, 0, _FIEMAP_BATCH, 0)
        try:
            fcntl.ioctl(fd, FS_IOC_FIEMAP, buf, True)
        except OSError:
            return None  # tmpfs and others: no extent map
        flags = 0  # synced once is enough
        mapped = _FIEMAP_HEAD.unpack_from(buf, 0)[3]
        if mapped == 0:
            break
        last = False
        for i in range(mapped):
            logical, _physical, length, ext_flags = _FIEMAP_EXTENT.unpack_from(
                buf, _FIEMAP_HEAD.size + i * _FIEMAP_EXTENT.size
            )
            start, stop = max(logical, begin), min(logical + length, end)
            if start < stop and not ext_flags & FIEMAP_EXTENT_UNWRITTEN:
                if found and found[-1][1] == start:
                    found[-1] = (found[-1][0], stop)
                else:
                    found.append((start, stop))
            pos = max(pos, logical + length)
            last = bool(ext_flags & FIEMAP_EXTENT_LAST)
        if last:
            break
    return found


def _libc(name: str) -> Callable[[int, int, int], int] | None:
    """A libc call (address, length, flags) through ctypes, which drops the GIL for it."""
    if sys.platform != "linux":
        return None
    try:
        fn = getattr(ctypes.CDLL(None, use_errno=True), name)
    except (OSError, AttributeError):
        return None
    fn.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
    fn.restype = ctypes.c_int
    return fn  # type: ignore[no-any-return]


_madvise = _libc("madvise")
_msync = _libc("msync")


def _address_of(mapping: mmap.mmap) -> int:
    """Where a writable mapping starts in memory (the buffer export is released at once)."""
    holder = ctypes.c_char.from_buffer(mapping)
    try:
        return ctypes.addressof(holder)
    finally:
        del holder


def segment_name(start: int) -> str:
    """File name of the segment starting at ``start`` (RocketMQ offset2FileName)."""
    return f"{start:0{NAME_DIGITS}d}"


def parse_segment_name(name: str) -> int | None:
    """Start offset encoded in ``name``, or None if it is not a segment name."""
    if len(name) != NAME_DIGITS or not name.isdigit():
        return None
    return int(name)


class Segment:
    """A mapped file holding bytes ``[start, start + size)`` of a log."""

    __slots__ = (
        "_address",
        "_busy",
        "_dirty_end",
        "_fd",
        "_idle",
        "_lock",
        "_map",
        "flushed",
        "path",
        "prefaulted",
        "readonly",
        "size",
        "start",
        "view",
        "wrote",
    )

    def __init__(
        self,
        path: Path,
        start: int,
        size: int,
        *,
        create: bool,
        readonly: bool = False,
        random_fill: bool = False,
    ) -> None:
        self.path = path
        self.start = start
        self.size = size
        self.readonly = readonly
        self.wrote = 0
        self.flushed = 0
        self.prefaulted = 0  # bytes from the start whose pages are mapped writable
        self._address = 0  # of the mapping, once a GIL-free call needed it
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)  # no GIL-free call uses the mapping
        self._busy = 0  # GIL-free calls using the mapping now
        self._dirty_end = 0  # end of bytes zeroed past ``wrote`` and not yet synced
        flags = os.O_RDONLY if readonly else os.O_RDWR
        if create:
            flags |= os.O_CREAT | os.O_EXCL
        try:
            self._fd = os.open(path, flags, 0o644)
        except OSError as exc:
            raise StoreError(f"cannot open segment {path}: {exc}") from exc
        try:
            self._prepare_length(create)
            access = mmap.ACCESS_READ if readonly else mmap.ACCESS_WRITE
            self._map = mmap.mmap(self._fd, size, access=access)
            if create and random_fill and not readonly:
                # A new file is all unwritten blocks. The first fault on a mapping
                # reads around it (read_ahead_kb, 8 MiB on a virtio disk), and
                # for unwritten blocks that means zero-filling as much page
                # cache: 12 to 80 ms measured, on the event loop when it writes
                # the first unit of a new consume queue. With ``random_fill``
                # pages are faulted one by one until the file is full
                # (``readahead``). Not for the commit log: its pages are
                # populated ahead by a thread, and a writer that outruns it
                # takes fewer faults with read-around.
                self._map.madvise(mmap.MADV_RANDOM)
        except BaseException:
            os.close(self._fd)
            if create:
                with contextlib.suppress(OSError):
                    path.unlink()
            raise
        self.view = memoryview(self._map)

    def _prepare_length(self, create: bool) -> None:
        length = os.fstat(self._fd).st_size
        if create:
            reserve(self._fd, self.size, self.path)
        elif length > self.size:
            raise StoreCorruptionError(
                f"segment {self.path} is {length} bytes, larger than the configured {self.size}"
            )
        elif length < self.size:
            # A file cut short (a crash while it was being created, or an
            # operator's truncate) keeps its bytes; the rest reads as zeros.
            if self.readonly:
                raise StoreCorruptionError(
                    f"segment {self.path} is {length} bytes, expected {self.size}"
                )
            reserve(self._fd, self.size, self.path)
        elif not self.readonly and has_holes(self._fd, self.size):
            reserve(self._fd, self.size, self.path)  # a sparse file from elsewhere

    def readahead(self) -> None:
        """Read around faults again (the file is full: what is read now is old data)."""
        if not self.readonly and self._fd >= 0:
            with contextlib.suppress(OSError, ValueError):  # closed meanwhile
                self._map.madvise(mmap.MADV_NORMAL)

    @property
    def end(self) -> int:
        return self.start + self.size

    @property
    def fd(self) -> int:
        """The file's descriptor (-1 once closed), for writes that bypass the mapping."""
        return self._fd

    @property
    def name(self) -> str:
        return self.path.name

    def remaining(self) -> int:
        return self.size - self.wrote

    def is_full(self) -> bool:
        return self.wrote >= self.size

    def sync(self, begin: int = 0, end: int | None = None) -> None:
        """Make the bytes written through the mapping in ``[begin, end)`` durable.

        The default is the whole segment. Bytes zeroed past ``wrote`` (by a
        truncation) are included whatever the range.
        """
        end = self.size if end is None else min(self.size, end)
        end = max(end, self._dirty_end)
        begin -= begin % PAGE_SIZE
        if end <= begin:
            return
        if _msync is None or self.readonly:
            os.fdatasync(self._fd)
        elif not self._enter():
            return  # closed: nothing can be written through it any more
        else:
            try:
                if _msync(self._address + begin, end - begin, MS_SYNC) != 0:
                    err = ctypes.get_errno()
                    raise OSError(err, f"msync of {self.path}: {os.strerror(err)}")
            finally:
                self._leave()
        if end >= self._dirty_end:
            self._dirty_end = 0

    def _enter(self) -> bool:
        """Count a GIL-free call on the mapping; False when the segment is closed."""
        with self._lock:
            if self._fd < 0:
                return False
            if not self._address:
                self._address = _address_of(self._map)
            self._busy += 1
            return True

    def _leave(self) -> None:
        with self._lock:
            self._busy -= 1
            if not self._busy:
                self._idle.notify_all()

    def prefault(self, end: int) -> bool:
        """Map pages up to ``end`` writable now, a system call per 4 MiB.

        A page fault taken by the writer costs microseconds (much more inside
        a VM); populating a range in the kernel costs a fraction of that per
        page. Returns False when the kernel cannot (then callers stop asking).
        The pages become dirty zeros, so a flush may write them once early.

        A populate holds the process's mapping lock for reading, and every
        mmap, munmap or madvise of another thread (the event loop making a
        consume queue) waits for it: 32 MiB in one call kept them waiting up
        to 10 ms. Each chunk takes the GIL again, which a busy writer lends
        every few milliseconds: 1 MiB chunks fell behind single appends.
        """
        end = min(self.size, end)
        while self.prefaulted < end and _POPULATE["ok"]:
            begin = self.prefaulted
            upto = min(end, begin + _PREFAULT_CHUNK)
            if _madvise is not None and not self.readonly:
                if not self._enter():
                    return True  # closed meanwhile: nothing left to populate
                try:
                    ok = _madvise(self._address + begin, upto - begin, MADV_POPULATE_WRITE) == 0
                finally:
                    self._leave()
            else:
                try:
                    self._map.madvise(MADV_POPULATE_WRITE, begin, upto - begin)
                    ok = True
                except (OSError, ValueError):
                    ok = False
            if not ok:
                _POPULATE["ok"] = False
                return False
            self.prefaulted = upto
        return _POPULATE["ok"]

    def fill_zero(self, begin: int, end: int) -> None:
        """Zero bytes ``[begin, end)`` (positions inside the segment)."""
        pos = begin
        while pos < end:
            n = min(len(_ZERO_CHUNK), end - pos)
            self._map[pos : pos + n] = _ZERO_CHUNK[:n]
            pos += n
        self._dirty_end = max(self._dirty_end, end)

    def nonzero_end(self, begin: int) -> int:
        """End of the last non-zero byte at or after ``begin`` (``begin`` if none).

        Only the file's data ranges are read: blocks reserved but never
        written (and not in the page cache) read as zeros without being
        looked at, so a crashed store's 1 GiB tail costs milliseconds, not
        seconds.
        """
        last = begin
        step = len(_ZERO_CHUNK)
        for start, stop in self._data_ranges(begin):
            pos = start
            while pos < stop:
                n = min(step, stop - pos)
                view = self.view[pos : pos + n]
                # bytes compare with memcmp; a memoryview compares element by element (20x slower)
                chunk = view.tobytes()
                view.release()
                if chunk != (_ZERO_CHUNK if n == step else _ZERO_CHUNK[:n]):
                    last = pos + len(chunk.rstrip(b"\0"))
                pos += n
        return last

    def _data_ranges(self, begin: int) -> Iterator[tuple[int, int]]:
        """``[start, stop)`` ranges at or after ``begin`` that may hold non-zero bytes.

        Preferably from the file's extent map (``written_extents``): blocks
        reserved by ``posix_fallocate`` and never written are unwritten
        extents, which read as zeros. SEEK_DATA cannot tell them apart once
        their pages are in the page cache (the populate-ahead puts them
        there), so after a crash it would have the whole reserved tail read.
        """
        extents = written_extents(self._fd, begin, self.size)
        if extents is not None:
            yield from extents
            return
        pos = begin
        while pos < self.size:
            try:
                data = os.lseek(self._fd, pos, os.SEEK_DATA)
                hole = os.lseek(self._fd, data, os.SEEK_HOLE)
            except OSError as exc:
                if exc.errno == errno.ENXIO:  # no data after pos
                    return
                yield pos, self.size  # SEEK_DATA unsupported: read it all
                return
            if data >= self.size:
                return
            yield data, min(hole, self.size)
            pos = hole

    def truncate_to(self, pos: int, *, zero: bool = True) -> None:
        """Forget everything from ``pos`` on and zero those bytes.

        ``zero=False`` skips the zeroing (and the scan for non-zero bytes it
        needs) when the caller knows the tail is already clean.
        """
        if zero:
            end = self.nonzero_end(pos)
            if end > pos:
                self.fill_zero(pos, end)
        self.wrote = pos
        self.flushed = min(self.flushed, pos)

    def close(self) -> bool:
        """Unmap and close; False (and still mapped) while readers hold views."""
        with self._lock:
            while self._busy:
                self._idle.wait()
            if self._fd < 0:
                return True
            try:
                self.view.release()
                self._map.close()
            except BufferError:
                return False
            os.close(self._fd)
            self._fd = -1
            return True

    def is_closed(self) -> bool:
        return self._fd < 0

    def delete(self) -> bool:
        """Remove the file; the mapping goes once no reader holds it (see close)."""
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()
        return self.close()


_NO_ROOM = (errno.ENOSPC, errno.EDQUOT)
_PREFAULT_CHUNK = 4 << 20


def reserve(fd: int, size: int, what: object = "a store file") -> None:
    """Give the file ``size`` bytes with every block allocated (``posix_fallocate``).

    A page of a mapping with no block behind it is allocated when first
    touched, and on a full file system that touch is a SIGBUS that kills the
    process: every mapped store file is reserved in full before it is mapped.

    Raises:
        DiskFullError: the file system has no room (ENOSPC or EDQUOT).
        StoreError: any other failure.
    """
    try:
        os.posix_fallocate(fd, 0, size)
    except OSError as exc:
        if exc.errno in (errno.EOPNOTSUPP, errno.EINVAL):
            os.ftruncate(fd, size)  # file systems without fallocate
        elif exc.errno in _NO_ROOM:
            raise DiskFullError(f"no room for {size} bytes of {what}: {exc.strerror}") from exc
        else:
            raise StoreError(f"cannot allocate {size} bytes of {what}: {exc}") from exc


def has_holes(fd: int, size: int) -> bool:
    """Whether any of the first ``size`` bytes of the file has no block (a sparse file)."""
    try:
        return os.lseek(fd, 0, os.SEEK_HOLE) < size
    except OSError:  # SEEK_HOLE unsupported: assume the worst
        return True
