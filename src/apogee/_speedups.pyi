from collections.abc import Sequence

from _typeshed import ReadableBuffer, WriteableBuffer

def java_hash(text: str, /) -> int: ...
def message_fields(text: str, /) -> tuple[int, str | None, str | None]: ...
def encode_record_into(
    buf: WriteableBuffer,
    pos: int,
    queue_id: int,
    flag: int,
    queue_offset: int,
    physical_offset: int,
    sys_flag: int,
    born_timestamp: int,
    born_host: bytes,
    store_timestamp: int,
    store_host: bytes,
    reconsume_times: int,
    prepared_transaction_offset: int,
    body: ReadableBuffer,
    topic_field: bytes,
    properties: bytes,
    body_crc: int | None = None,
    /,
) -> int: ...
def index_work(
    entries: Sequence[tuple[str, int, int, int, int, int, int, str | None, str | None, int, int]],
    /,
) -> list[tuple[int, int, list[int]]]: ...
def index_put(
    mm: WriteableBuffer,
    slot_num: int,
    index_num: int,
    begin_timestamp: int,
    end_timestamp: int,
    begin_phy_offset: int,
    end_phy_offset: int,
    hash_slot_count: int,
    index_count: int,
    work: list[tuple[int, int, list[int]]],
    rec: int,
    key: int,
    /,
) -> tuple[int, int, int, int, int, int, int, int]: ...
