"""Which broker a queue is pulled from: the suggestion, the master, a slave when it is gone."""

from __future__ import annotations

from apogee.client.pull_route import PullTarget, PullTargets
from apogee.model.client import MessageQueue
from apogee.model.route import BrokerData

MQ = MessageQueue("T", "broker-a", 0)
BOTH = BrokerData("c", "broker-a", {0: "m:1", 1: "s1:1", 2: "s2:1"})


def test_the_master_first_then_what_the_last_answer_suggested() -> None:
    targets = PullTargets()
    assert targets.target(MQ, BOTH) == PullTarget("m:1", 0)
    targets.suggest(MQ, 2)
    target = targets.target(MQ, BOTH)
    assert target == PullTarget("s2:1", 2) and target.is_slave
    assert targets.target(MessageQueue("T", "broker-a", 1), BOTH) == PullTarget("m:1", 0)
    targets.suggest(MQ, 0)
    assert targets.target(MQ, BOTH) == PullTarget("m:1", 0)


def test_a_suggested_broker_the_route_lacks_falls_back_to_the_master_then_a_slave() -> None:
    targets = PullTargets()
    targets.suggest(MQ, 5)
    assert targets.target(MQ, BOTH) == PullTarget("m:1", 0)
    master_gone = BrokerData("c", "broker-a", {2: "s2:1", 1: "s1:1"})
    assert targets.target(MQ, master_gone) == PullTarget("s1:1", 1)
    assert targets.target(MQ, BrokerData("c", "broker-a", {})) is None
