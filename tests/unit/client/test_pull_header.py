"""A pull header joined from ``PullPieces`` is the header the JSON encoder writes, byte for byte."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from apogee.client.pull_header import PullPieces
from apogee.codes import CURRENT_VERSION, RequestCode, SerializeType
from apogee.protocol import header_json
from apogee.protocol.command import DEFAULT_LANGUAGE, new_command
from apogee.protocol.headers import PullMessageRequestHeader

# names and expressions with what JSON escapes and what %-formatting would read
texts = st.lists(
    st.characters(codec="utf-8")
    | st.sampled_from(["%", "%d", '"', "\\", "\\u0000", "\x00", "\n", "é", "😀", "\u2028"]),
    min_size=1,
    max_size=12,
).map("".join)
offsets = st.integers(0, 2**63 - 1)
sys_flags = st.integers(0, 2**31 - 1)
opaques = st.integers(0, 2**31 - 1)


def template(group: str, topic: str, expression: str, kind: str | None) -> dict[str, str]:
    return PullMessageRequestHeader(
        consumer_group=group, topic=topic, queue_id=3, queue_offset=0, max_msg_nums=32,
        sys_flag=0, commit_offset=0, suspend_timeout_millis=15_000, sub_version=17,
        subscription=expression, expression_type=kind,
    ).to_ext()  # fmt: skip


def encoded(ext: dict[str, str], opaque: int) -> bytes:
    cmd = new_command(
        int(RequestCode.PULL_MESSAGE), DEFAULT_LANGUAGE, CURRENT_VERSION, opaque, 0, None, ext,
        b"", SerializeType.JSON,
    )  # fmt: skip
    return header_json.encode(cmd)


@given(texts, texts, texts, st.sampled_from(["TAG", "SQL92", None]), offsets, sys_flags,
       offsets, opaques)  # fmt: skip
def test_a_pull_header_is_the_encoders(  # noqa: PLR0917
    group: str, topic: str, expression: str, expression_type: str | None, offset: int,
    sys_flag: int, committed: int, opaque: int,
) -> None:  # fmt: skip
    ext = template(group, topic, expression, expression_type)
    pieces = PullPieces.of(ext)
    if pieces is None:  # a text holding what stands for a value, as written: the command path
        assert any(mark in group + topic + expression for mark in ("\x00", "\\u0000"))
        return
    ours = pieces.head(offset, sys_flag, committed) + str(opaque).encode() + pieces.end
    expected = dict(
        ext, queueOffset=str(offset), sysFlag=str(sys_flag), commitOffset=str(committed)
    )
    assert ours == encoded(expected, opaque)


def test_the_usual_header_has_pieces() -> None:
    pieces = PullPieces.of(template("group_a", "TopicA", "TagA || TagB", "TAG"))
    assert pieces is not None
    head = pieces.head(120, 7, 96)
    assert b'"queueOffset":"120","maxMsgNums":"32","sysFlag":"7","commitOffset":"96"' in head
    assert head.endswith(b'"opaque":') and pieces.end.startswith(b",")


def test_a_template_without_the_fields_a_pull_sets_has_none() -> None:
    ext = template("g", "T", "*", "TAG")
    del ext["commitOffset"]
    assert PullPieces.of(ext) is None
    reordered = {k: v for k, v in ext.items() if k != "queueOffset"}
    reordered["queueOffset"] = "0"
    reordered["commitOffset"] = "0"
    assert PullPieces.of(reordered) is None
