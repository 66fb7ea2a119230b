"""ClientRegistry: heartbeats, expiry on a FakeClock, closed channels, membership notifications."""

from __future__ import annotations

from collections.abc import Hashable

from apogee._util.clock import FakeClock
from apogee.broker.clients import ClientRegistry
from apogee.model.client import ConsumerData, MessageModel
from apogee.model.javahash import java_string_hash
from apogee.model.subscription import EXPRESSION_SQL92, SubscriptionData


class Notes:
    """Records what the registry asked to be sent."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, list[Hashable]]] = []

    def __call__(self, group: str, channels: list[Hashable]) -> None:
        self.sent.append((group, sorted(channels, key=str)))


def consumer(group: str = "cg", *subs: SubscriptionData) -> ConsumerData:
    return ConsumerData(group, subscriptions=subs or (SubscriptionData("T"),))


def test_a_new_consumer_notifies_the_whole_group() -> None:
    clock, notes = FakeClock(), Notes()
    reg = ClientRegistry(clock, notes)

    assert reg.register_consumer("c1", "id-1", consumer())
    assert notes.sent == [("cg", ["c1"])]
    assert reg.register_consumer("c2", "id-2", consumer())
    assert notes.sent[-1] == ("cg", ["c1", "c2"])
    assert reg.consumer_ids("cg") == ["id-1", "id-2"]

    # a repeated heartbeat changes nothing
    assert not reg.register_consumer("c1", "id-1", consumer())
    assert len(notes.sent) == 2


def test_a_changed_subscription_notifies() -> None:
    notes = Notes()
    reg = ClientRegistry(FakeClock(), notes)
    reg.register_consumer("c1", "id-1", consumer())
    reg.register_consumer("c1", "id-1", consumer("cg", SubscriptionData.build("T", "A")))
    assert len(notes.sent) == 2


def test_notifications_respect_the_group_switch() -> None:
    notes = Notes()
    reg = ClientRegistry(FakeClock(), notes, wants_notify=lambda group: group != "quiet")
    reg.register_consumer("c1", "id-1", consumer("quiet"))
    reg.register_consumer("c2", "id-2", consumer("loud"))
    assert [group for group, _ in notes.sent] == ["loud"]


def test_closed_channels_leave_at_once_and_the_rest_hear_of_it() -> None:
    notes = Notes()
    reg = ClientRegistry(FakeClock(), notes)
    reg.register_consumer("c1", "id-1", consumer())
    reg.register_consumer("c2", "id-2", consumer())
    reg.register_producer("c1", "id-1", "pg")

    reg.channel_closed("c1")

    assert notes.sent[-1] == ("cg", ["c2"])
    assert reg.consumer_ids("cg") == ["id-2"]
    assert list(reg.producer_channels("pg")) == []
    reg.channel_closed("c2")
    assert reg.consumer_group("cg") is None


def test_silent_channels_expire_after_120_seconds() -> None:
    clock, notes = FakeClock(), Notes()
    reg = ClientRegistry(clock, notes)
    reg.register_consumer("c1", "id-1", consumer())
    reg.register_producer("p1", "id-p", "pg")
    clock.advance(60)
    reg.register_consumer("c2", "id-2", consumer())

    clock.advance(60)
    assert reg.scan_expired() == []  # exactly 120 s is not yet expired

    clock.advance(1)
    expired = reg.scan_expired()

    assert sorted(c.client_id for c in expired) == ["id-1", "id-p"]
    assert reg.consumer_ids("cg") == ["id-2"]
    assert notes.sent[-1] == ("cg", ["c2"])
    assert list(reg.producer_channels("pg")) == []


def test_heartbeats_keep_a_channel_alive() -> None:
    clock = FakeClock()
    reg = ClientRegistry(clock, Notes())
    for _ in range(5):
        reg.register_consumer("c1", "id-1", consumer())
        clock.advance(100)
    assert reg.scan_expired() == []


def test_tag_codes_are_recomputed_from_the_tags() -> None:
    # the C++ client sends codeSet [0, 0] for "TagA || TagB"
    garbage = SubscriptionData("T", "TagA || TagB", ("TagA", "TagB"), (0, 0), 5)
    reg = ClientRegistry(FakeClock(), Notes())
    reg.register_consumer("c1", "id-1", consumer("cg", garbage))

    sub = reg.subscription("cg", "T")

    assert sub is not None
    assert sub.code_set == (java_string_hash("TagA"), java_string_hash("TagB"))
    assert sub.sub_version == 5


def test_consumer_settings_are_kept() -> None:
    reg = ClientRegistry(FakeClock(), Notes())
    data = ConsumerData("cg", message_model=MessageModel.BROADCASTING)
    reg.register_consumer("c1", "id-1", data)
    info = reg.consumer_group("cg")
    assert info is not None
    assert info.message_model is MessageModel.BROADCASTING


def sql92(topic: str, expression: str) -> SubscriptionData:
    return SubscriptionData(topic, expression, expression_type=EXPRESSION_SQL92)


def test_sql92_subscriptions_are_kept_with_their_compiled_filter() -> None:
    reg = ClientRegistry(FakeClock(), Notes(), property_filter=True)
    subs = (sql92("T", "a > 1"), sql92("U", "a >"), SubscriptionData.build("V", "TagA"))
    reg.register_consumer("c1", "id-1", consumer("cg", *subs))

    compiled = reg.sql_filter("cg", "T")
    assert compiled is not None and compiled.expression == "a > 1"
    assert compiled.matches({"a": "2"}) and not compiled.matches({"a": "0"})
    assert reg.sql_filter("cg", "U") is None  # does not compile: no filter data
    assert reg.sql_filter("cg", "V") is None  # TAG
    assert reg.sql_filter("other", "T") is None

    reg.register_consumer("c1", "id-1", consumer("cg", sql92("T", "a < 1")))
    changed = reg.sql_filter("cg", "T")
    assert changed is not None and changed.expression == "a < 1"
    assert reg.sql_filter("cg", "U") is None


def test_without_property_filters_nothing_is_compiled() -> None:
    reg = ClientRegistry(FakeClock(), Notes())
    reg.register_consumer("c1", "id-1", consumer("cg", sql92("T", "a > 1")))
    assert reg.sql_filter("cg", "T") is None
    sub = reg.subscription("cg", "T")
    assert sub is not None and sub.sub_string == "a > 1"


def test_a_new_expression_type_is_a_changed_subscription() -> None:
    notes = Notes()
    reg = ClientRegistry(FakeClock(), notes, property_filter=True)
    reg.register_consumer("c1", "id-1", consumer("cg", SubscriptionData("T", "a")))
    assert reg.register_consumer("c1", "id-1", consumer("cg", sql92("T", "a")))
    assert len(notes.sent) == 2
