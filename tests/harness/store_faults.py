"""Faults put into a real store from outside, for the tests of what it does then."""

from __future__ import annotations

import os

from apogee.store.file_store import FileMessageStore


def refuse_writes(store: FileMessageStore) -> None:
    """Make the file system refuse the next write to the current commit-log file.

    A real refusal: the segment's descriptor is replaced (``dup2``) by one opened
    read-only on the same file, so ``pwrite`` fails with EBADF.
    """
    seg = store.commit_log.queue.segments[-1]
    read_only = os.open(seg.path, os.O_RDONLY)
    try:
        os.dup2(read_only, seg.fd)
    finally:
        os.close(read_only)
