"""ClientRegistry: heartbeats, expiry on a FakeClock, closed channels, membership notifications."""

from __future__ import annotations

from collections.abc import Hashable

from apogee._util.clock import FakeClock
from apogee.broker.clients import ClientRegistry
from apogee.model.client import ConsumerData, MessageModel
from apogee.model.javahash import java_string_hash
from apogee.model.subscription import SubscriptionData


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
