"""Damaged copies of encoded headers, for property tests of the decoders.

Owns: :func:`damaged`, one to three edits drawn by hypothesis (a byte
deleted, a run from ``inserts`` put in, a byte overwritten), so that a
decoder under test meets the inputs its error paths exist for.
"""

from __future__ import annotations

from collections.abc import Sequence

from hypothesis import strategies as st


def damaged(header: bytes, data: st.DataObject, inserts: Sequence[bytes]) -> bytes:
    """``header`` with one to three edits drawn from ``data``."""
    out = bytearray(header)
    for _ in range(data.draw(st.integers(1, 3))):
        at = data.draw(st.integers(0, len(out)))
        edit = data.draw(st.integers(0, 2))
        if edit == 0 and at < len(out):
            del out[at]
        elif edit == 1:
            out[at:at] = data.draw(st.sampled_from(inserts))
        elif at < len(out):
            out[at] = data.draw(st.integers(0, 255))
    return bytes(out)
