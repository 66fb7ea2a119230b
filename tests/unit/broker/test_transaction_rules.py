"""The records of transactional messages, and the book of open transactions."""

from __future__ import annotations

import dataclasses

import pytest

from apogee.broker.transaction import (
    check_request,
    check_times,
    committed_message,
    end_problem,
    half_message,
    immunity_ms,
    is_half_message,
    lineage,
    op_message,
    renewed_half,
)
from apogee.broker.transaction_book import TransactionBook
from apogee.model.message import (
    MessageExt,
    StoreMessage,
    properties_to_string,
    string_to_properties,
)
from apogee.model.message_codec import decode_record
from apogee.protocol.headers import EndTransactionRequestHeader

HALF_PROPS = {
    "TAGS": "a", "KEYS": "k", "UNIQ_KEY": "U1", "TRAN_MSG": "true", "PGROUP": "pg",
    "REAL_TOPIC": "T1", "REAL_QID": "3", "CLUSTER": "c",
}  # fmt: skip


def half(queue_offset: int = 5, **props: str) -> MessageExt:
    return MessageExt(
        topic="RMQ_SYS_TRANS_HALF_TOPIC", queue_id=0, flag=9, body=b"body",
        properties={**HALF_PROPS, **props}, sys_flag=0x1, born_timestamp=123,
        born_host=("10.0.0.7", 5000), store_timestamp=456, store_host=("10.0.0.1", 10911),
        reconsume_times=0, prepared_transaction_offset=0, queue_offset=queue_offset,
        commit_log_offset=4096, store_size=200, body_crc=0, msg_id="OFFSETID",
    )  # fmt: skip


@pytest.mark.parametrize(
    ("props", "expected"),
    [
        ({"TRAN_MSG": "true"}, True),
        ({"TRAN_MSG": "TRUE"}, True),
        ({"TRAN_MSG": "false"}, False),
        ({"TRAN_MSG": "yes"}, False),
        ({"TAGS": "TRAN_MSG"}, False),
        ({}, False),
    ],
)
def test_half_messages_are_those_with_tran_msg_true(props: dict[str, str], expected: bool) -> None:
    assert is_half_message(properties_to_string(props)) is expected


def test_a_send_becomes_a_half_record_in_the_half_queue() -> None:
    props = {"TRAN_MSG": "true", "PGROUP": "pg", "DELAY": "3", "TRAN_PREPARED_QUEUE_OFFSET": "0"}
    sent = StoreMessage("T1", 3, b"b", properties_to_string(props), 7, 0x1 | 0x4, 99)

    stored = half_message(sent)

    assert (stored.topic, stored.queue_id) == ("RMQ_SYS_TRANS_HALF_TOPIC", 0)
    assert string_to_properties(stored.properties) == {
        "TRAN_MSG": "true", "PGROUP": "pg", "REAL_TOPIC": "T1", "REAL_QID": "3",
    }  # fmt: skip
    assert (stored.sys_flag, stored.flag, stored.born_timestamp) == (0x1, 7, 99)


def test_commit_restores_the_destination_and_marks_the_record() -> None:
    msg = committed_message(half(), "T1", 3)

    assert (msg.topic, msg.queue_id, msg.body, msg.flag) == ("T1", 3, b"body", 9)
    props = string_to_properties(msg.properties)
    assert props == {"TAGS": "a", "KEYS": "k", "UNIQ_KEY": "U1", "PGROUP": "pg", "CLUSTER": "c"}
    assert msg.sys_flag == 0x1 | 0x8
    assert msg.prepared_transaction_offset == 4096
    assert msg.born_host == ("10.0.0.7", 5000)


def test_the_op_record_names_the_half_queue_offset() -> None:
    op = op_message(half(queue_offset=42), ("10.0.0.1", 10911), 777)

    assert (op.topic, op.queue_id, op.body) == ("RMQ_SYS_TRANS_OP_HALF_TOPIC", 0, b"42")
    assert string_to_properties(op.properties)["TAGS"] == "d"
    assert (op.born_timestamp, op.sys_flag) == (777, 0)


def test_copies_carry_their_lineage_and_count_checks() -> None:
    first = half(queue_offset=5)
    assert lineage(first) == 5 and check_times(first) == 0

    copy = renewed_half(first, checked=True)
    props = string_to_properties(copy.properties)
    assert props["TRAN_PREPARED_QUEUE_OFFSET"] == "5"
    assert props["TRANSACTION_CHECK_TIMES"] == "1"
    assert (copy.topic, copy.body, copy.flag, copy.born_timestamp) == (
        "RMQ_SYS_TRANS_HALF_TOPIC", b"body", 9, 123,
    )  # fmt: skip

    later = half(queue_offset=9, **props)
    assert lineage(later) == 5 and check_times(later) == 1
    quiet = string_to_properties(renewed_half(later, checked=False).properties)
    assert (quiet["TRAN_PREPARED_QUEUE_OFFSET"], quiet["TRANSACTION_CHECK_TIMES"]) == ("5", "1")
    # a lineage after the copy itself is not believed
    assert lineage(half(queue_offset=2, TRAN_PREPARED_QUEUE_OFFSET="8")) == 2


def test_immunity_is_in_seconds_and_falls_back_to_the_timeout() -> None:
    assert immunity_ms(half(), 6000) is None
    assert immunity_ms(half(CHECK_IMMUNITY_TIME_IN_SECONDS="60"), 6000) == 60_000
    assert immunity_ms(half(CHECK_IMMUNITY_TIME_IN_SECONDS="-1"), 6000) == 6000
    assert immunity_ms(half(CHECK_IMMUNITY_TIME_IN_SECONDS="soon"), 6000) == 6000


def end(**changes: object) -> EndTransactionRequestHeader:
    base = EndTransactionRequestHeader("pg", 5, 4096, 8, "U1")
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("msg", "header", "named"),
    [
        (None, end(), "no prepared transaction message"),
        (half(), end(producer_group="other"), "producerGroup"),
        (half(), end(tran_state_table_offset=6), "tranStateTableOffset"),
        (dataclasses.replace(half(), commit_log_offset=4000), end(), "not the start of a record"),
        (dataclasses.replace(half(), topic="T1"), end(), "not a half message"),
        (half(REAL_QID="x"), end(), "REAL_TOPIC / REAL_QID"),
    ],
)
def test_end_problems_name_what_does_not_match(
    msg: MessageExt | None, header: EndTransactionRequestHeader, named: str
) -> None:
    problem = end_problem(msg, header)
    assert problem is not None and named in problem


def test_a_matching_end_has_no_problem() -> None:
    assert end_problem(half(), end()) is None


def test_the_check_carries_the_copy_as_its_real_message() -> None:
    header, body = check_request(half(queue_offset=11))

    assert (header.tran_state_table_offset, header.commit_log_offset) == (11, 4096)
    assert (header.msg_id, header.transaction_id, header.offset_msg_id) == ("U1", "U1", "OFFSETID")
    assert header.topic == "T1"
    msg = decode_record(body)
    assert (msg.topic, msg.queue_id, msg.queue_offset, msg.body) == ("T1", 3, 11, b"body")
    assert msg.properties["PGROUP"] == "pg" and msg.store_size == len(body)


def test_the_book_keeps_open_lineages_until_the_progress_passes_them() -> None:
    book = TransactionBook()
    book.opened(0)
    book.opened(1)
    book.renewed(0, 2)  # lineage 0 was checked: its newest copy is 2

    assert book.is_current(0, 2) and not book.is_current(0, 0)
    assert book.resolve(1, op_offset=0) and not book.resolve(1, op_offset=1)
    assert not book.is_open(1) and book.open_count == 1
    assert book.op_progress() == 0  # lineage 1's op record is still needed after a restart

    book.advance(2)  # copies 0 and 1 are finished; lineage 1 is forgotten
    assert len(book) == 1 and book.is_open(0)
    assert book.op_progress() == 1
    assert not book.is_open(1)  # forgotten means finished

    book.resolve(0, op_offset=1)
    book.advance(3)
    assert len(book) == 0 and book.op_progress() == 2
    book.advance(1)  # never backwards
    assert book.half_progress == 3


def test_the_book_knows_which_copies_a_check_round_reads_without_reading_them() -> None:
    book = TransactionBook()
    for offset in range(4):
        book.opened(offset)
    book.renewed(0, 4)  # lineage 0 checked: copy 4 replaces copy 0
    book.resolve(1, op_offset=0)
    book.renewed(1, 5)  # a copy of a resolved lineage (stored before its end was seen)
    book.renewed(2, 1)  # an older copy changes nothing

    to_check = [o for o in range(7) if book.to_check(o)]
    assert to_check == [2, 3, 4]
    for family, offset in ((0, 4), (2, 2), (3, 3), (1, 5), (0, 0), (1, 1)):
        assert book.to_check(offset) == book.is_current(family, offset)

    book.resolve(2)
    book.resolve(3)
    book.advance(4)  # lineages 2 and 3 are wholly below 4: forgotten
    assert [o for o in range(7) if book.to_check(o)] == [4] and len(book) == 2
