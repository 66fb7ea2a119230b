"""The producer's Message: tags, keys and delay level live in its properties, as in RocketMQ."""

from __future__ import annotations

from apogee.model.message import Message


def test_tags_keys_and_delay_become_properties() -> None:
    msg = Message("orders", b"x", tags="created", keys=["o-1", "o-2"], delay_level=3)
    assert msg.properties == {"TAGS": "created", "KEYS": "o-1 o-2", "DELAY": "3"}
    assert (msg.tags, msg.keys, msg.delay_level) == ("created", "o-1 o-2", 3)


def test_one_key_as_a_string_and_setters_that_clear() -> None:
    msg = Message("orders", b"x", keys="only")
    assert msg.keys == "only"
    msg.keys = None
    msg.tags = "t"
    msg.tags = None
    msg.delay_level = 2
    msg.delay_level = 0
    assert msg.properties == {}
    assert msg.delay_level == 0
    assert msg.uniq_key is None


def test_the_callers_properties_are_copied() -> None:
    mine = {"ua": "v"}
    msg = Message("orders", b"x", properties=mine, tags="t")
    msg.properties["UNIQ_KEY"] = "U"
    assert mine == {"ua": "v"}
    assert msg.properties == {"ua": "v", "TAGS": "t", "UNIQ_KEY": "U"}
    assert msg.uniq_key == "U"


def test_messages_compare_by_value() -> None:
    assert Message("t", b"a", tags="x") == Message("t", b"a", properties={"TAGS": "x"})
    assert Message("t", b"a") != Message("t", b"a", flag=1)
