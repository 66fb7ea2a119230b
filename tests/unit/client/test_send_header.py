"""A send header joined from ``SendPieces`` is the header the JSON encoder writes, byte for byte."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from apogee.client.broker_api import send_request
from apogee.client.send_header import SendPieces
from apogee.protocol import header_json
from apogee.protocol.headers import SendMessageRequestHeader

names = st.from_regex(r"[%|a-zA-Z0-9_-]{1,20}", fullmatch=True)
# property strings with everything JSON escapes: separators, quotes, controls, non-ASCII
texts = st.text(
    st.characters(codec="utf-8")
    | st.sampled_from(["\x01", "\x02", '"', "\\", "/", "\n", "\x7f", "é", "😀", "\u2028"]),
    max_size=40,
)
hexes = st.from_regex(r"[0-9A-F]{32}", fullmatch=True)


def template(group: str, topic: str, queue_nums: int = 4) -> dict[str, str]:
    return SendMessageRequestHeader(
        producer_group=group,
        topic=topic,
        default_topic="TBW102",
        default_topic_queue_nums=queue_nums,
        queue_id=0,
        sys_flag=0,
        born_timestamp=0,
        flag=0,
        properties="",
    ).to_ext_v2()


def encoded(ext: dict[str, str], opaque: int) -> tuple[bytes, bytes]:
    """(the codec's header, the dict route's) of the send request with ``ext``."""
    cmd = send_request(ext, b"body", False)
    cmd.opaque = opaque
    return header_json.encode(cmd), header_json._encode_dict(cmd)


def joined(  # noqa: PLR0917
    pieces: SendPieces, queue_id: int, sys_flag: int, born: int, rest: bytes, opaque: int
) -> bytes:
    head = b"%b%d%b%d%b" % (pieces.head, queue_id, pieces.mid(sys_flag), born, rest)
    return b"%b%d%b" % (head, opaque, pieces.end)


ids = st.integers(0, 2**31 - 1)
flags = st.integers(0, 2**31 - 1)
times = st.integers(0, 2**45)


@given(names, names, hexes, ids, flags, times, ids)
def test_a_plain_message_header_is_the_encoders(  # noqa: PLR0917
    group: str, topic: str, uniq: str, queue_id: int, sys_flag: int, born: int, opaque: int
) -> None:
    ext = template(group, topic)
    pieces = SendPieces.of(ext)
    assert pieces is not None
    ext.update(e=str(queue_id), f=str(sys_flag), g=str(born), i=f"UNIQ_KEY\x01{uniq}\x02")
    ours = joined(pieces, queue_id, sys_flag, born, pieces.rest_plain(uniq), opaque)
    assert (ours, ours) == encoded(ext, opaque)


@given(names, names, texts, ids, flags, flags, times, ids, st.integers(1, 64))
def test_any_message_header_is_the_encoders(  # noqa: PLR0917
    group: str,
    topic: str,
    properties: str,
    queue_id: int,
    sys_flag: int,
    flag: int,
    born: int,
    opaque: int,
    queue_nums: int,
) -> None:
    ext = template(group, topic, queue_nums)
    pieces = SendPieces.of(ext)
    assert pieces is not None
    ext.update(e=str(queue_id), f=str(sys_flag), g=str(born), h=str(flag), i=properties)
    ours = joined(pieces, queue_id, sys_flag, born, pieces.rest(flag, properties), opaque)
    assert (ours, ours) == encoded(ext, opaque)


def test_a_template_of_another_layout_has_no_pieces() -> None:
    ext = template("pg", "T")
    assert SendPieces.of({**ext, "j": "1"}) is None  # reconsume times: a field of its own
    assert SendPieces.of(dict(reversed(ext.items()))) is None
    batch = SendMessageRequestHeader(
        producer_group="pg", topic="T", default_topic="TBW102", default_topic_queue_nums=4,
        queue_id=0, sys_flag=0, born_timestamp=0, flag=0, properties="", batch=True,
    ).to_ext_v2()  # fmt: skip
    # a batch template has the same keys; its pieces write "m":"true"
    pieces = SendPieces.of(batch)
    assert pieces is not None
    assert b'"m":"true"' in pieces.rest(0, "")
