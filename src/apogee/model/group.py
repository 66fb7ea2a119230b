"""Per consumer-group settings a broker keeps (RocketMQ SubscriptionGroupConfig).

Owns: SubscriptionGroupConfig with RocketMQ's defaults. Pure value type;
the JSON shape lives in ``apogee.protocol.bodies``.

Fields up to ``notify_consumer_ids_changed_enable`` are the 4.x class; the
rest came with 5.x and keep their 5.x defaults, so a 4.x peer that never
sends them reads back as the defaults.
"""

from __future__ import annotations

from dataclasses import dataclass, field

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
    # 5.x
    consume_message_orderly: bool = False
    group_sys_flag: int = 0
    consume_timeout_minute: int = 15
    attributes: dict[str, str] = field(default_factory=dict)
