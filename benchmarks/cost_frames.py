"""What the broker-cost benchmarks share: pre-encoded sends and a socket stand-in.

Owns: ``uniq_key`` (a message id for the i-th message of a run),
``send_frame`` and ``send_frames`` (send request frames, encoded ahead so
that the figures hold only the broker's work) and ``DiscardTransport`` (a stand-in for
the socket of a server-side ``Connection``, named so: it counts the answer
bytes and drops them), used by ``request_cost.py``, ``broker_cost.py`` and
``end_transaction_cost.py``.
"""

from __future__ import annotations

import os
import time
from typing import Any

from apogee.codes import RequestCode
from apogee.protocol import headers as h
from apogee.protocol.command import RemotingCommand
from apogee.protocol.framing import encode_bytes

BODY = 1024


def uniq_key(i: int) -> str:
    """The UNIQ_KEY of the i-th message: the form a client writes, unique per run."""
    return f"7F00000100002A9F{i:016X}"


def send_frame(
    topic: str,
    queue_id: int,
    body: bytes,
    *,
    properties: str = "",
    batch: bool = False,
    sys_flag: int = 0,
    group: str = "cost_pg",
    opaque: int | None = None,
) -> bytes:
    """One encoded SEND_MESSAGE_V2 (``batch``: SEND_BATCH_MESSAGE) request frame."""
    header = h.SendMessageRequestHeader(
        producer_group=group,
        topic=topic,
        default_topic="TBW102",
        default_topic_queue_nums=4,
        queue_id=queue_id,
        sys_flag=sys_flag,
        born_timestamp=int(time.time() * 1000),
        flag=0,
        properties=properties,
        batch=batch,
    )
    code = RequestCode.SEND_BATCH_MESSAGE if batch else RequestCode.SEND_MESSAGE_V2
    cmd = RemotingCommand.request(code, header.to_ext_v2(), body)
    if opaque is not None:
        cmd.opaque = opaque
    return encode_bytes(cmd)


def send_frames(topic: str, count: int, first_opaque: int = 0, queues: int = 4) -> list[bytes]:
    """``count`` SEND_MESSAGE_V2 frames of one random 1 KiB body, round-robin over queues."""
    body = os.urandom(BODY)
    return [
        send_frame(
            topic,
            i % queues,
            body,
            opaque=first_opaque + i,
            properties=f"UNIQ_KEY\x01{uniq_key(first_opaque + i)}\x02WAIT\x01true\x02",
        )
        for i in range(count)
    ]


class DiscardTransport:
    """Stands in for the socket: answers are counted, then dropped."""

    def __init__(self) -> None:
        self.bytes_out = 0

    def write(self, data: Any) -> None:
        self.bytes_out += memoryview(data).nbytes

    def writelines(self, parts: Any) -> None:
        for part in parts:
            self.write(part)

    def is_closing(self) -> bool:
        return False

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 40000) if name == "peername" else default

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        pass

    def get_write_buffer_size(self) -> int:
        return 0

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    def abort(self) -> None:
        pass

    def close(self) -> None:
        pass
