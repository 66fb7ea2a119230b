"""What the tests of ``header_scan``'s short answers (``send_answer``, ``pull_answer``) draw.

Answer headers as JSON objects: each top-level field and each ext field present or
not, each with its usual kind of value or any other scalar, in any order; counts
written as the short answers take them or as only ``int()`` would.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hypothesis import strategies as st

texts = st.text(
    st.characters(codec="utf-8") | st.sampled_from(["\x01", '"', "\\", "é", "😀", "\u2028"]),
    max_size=8,
)
counts = st.sampled_from(
    ["0", "3", "03", "-1", "+1", " 1", "1_0", "", "\u0661", "9" * 18, "9" * 19]
) | st.integers(0, 2**62).map(str)
values = (
    st.none() | st.booleans() | st.integers(-(2**63), 2**63) | texts | st.floats(allow_nan=False)
)
#: bytes that damage an answer's header where they are put in
INSERTS = [b"\\", b'"', b",", b"}", b"0", b" ", b"\xff"]


def answers(
    ext_fields: Sequence[tuple[str, st.SearchStrategy[Any]]], codes: st.SearchStrategy[Any]
) -> st.SearchStrategy[dict[str, Any]]:
    """Answer headers whose ext fields are drawn from ``ext_fields`` (name, values) and
    two more of any name, and whose code from ``codes``."""

    @st.composite
    def answer(draw: st.DrawFn) -> dict[str, Any]:
        ext: dict[str, Any] = {}
        for key, strategy in ext_fields:
            if draw(st.integers(0, 9)) > 0:
                ext[key] = draw(strategy)
        ext.update(draw(st.dictionaries(texts, values, max_size=2)))
        obj: dict[str, Any] = {}
        fields: tuple[tuple[str, st.SearchStrategy[Any]], ...] = (
            ("code", codes), ("extFields", st.just(ext) | values),
            ("flag", st.sampled_from([0, 1, 3]) | values), ("language", texts | values),
            ("opaque", st.integers(-(2**31), 2**31) | values), ("remark", texts | values),
            ("version", st.integers(0, 500) | values), ("serializeTypeCurrentRPC", values),
        )  # fmt: skip
        for key, strategy in fields:
            if draw(st.integers(0, 9)) > 0:
                obj[key] = draw(strategy)
        keys = draw(st.permutations(list(obj)))
        return {key: obj[key] for key in keys}

    return answer()
