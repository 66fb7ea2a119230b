"""Per consumer-group settings a broker keeps (RocketMQ SubscriptionGroupConfig).

Owns: SubscriptionGroupConfig with RocketMQ's defaults. Imports: ``apogee.model.route``.
Pure value type; the JSON shape lives with whoever persists or sends it.
"""

from __future__ import annotations

from dataclasses import dataclass

from apogee.model.route import MASTER_ID

#: RocketMQ's default retry budget: a message is delivered at most 1 + 16 times.
DEFAULT_RETRY_MAX_TIMES = 16


@dataclass(frozen=True, slots=True)
class SubscriptionGroupConfig:
    group_name: str
    consume_enable: bool = True
    consume_from_min_enable: bool = True
    consume_broadcast_enable: bool = True
    retry_queue_nums: int = 1
    retry_max_times: int = DEFAULT_RETRY_MAX_TIMES
    broker_id: int = MASTER_ID
    which_broker_when_consume_slowly: int = 1
    notify_consumer_ids_changed_enable: bool = True
