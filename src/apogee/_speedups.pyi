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
def pwrite_all(fd: int, buf: ReadableBuffer, length: int, offset: int, /) -> None: ...

class GroupSync:
    def __init__(self, synced: int = 0) -> None: ...
    @property
    def synced(self) -> int: ...
    @property
    def requested(self) -> int: ...
    @property
    def syncs(self) -> int: ...
    @property
    def sync_seconds(self) -> float: ...
    @property
    def error(self) -> int: ...
    @property
    def running(self) -> bool: ...
    @property
    def files(self) -> int: ...
    def add_file(self, start: int, size: int, fd: int, /) -> None: ...
    def request(self, end: int, /) -> None: ...
    def run(self) -> None: ...
    def wait(self, seen: int, timeout_s: float, /) -> int: ...
    def stop(self) -> None: ...
    def fileno(self) -> int: ...
    def ack(self) -> None: ...
