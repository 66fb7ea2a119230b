"""The broker's consumer-group table (RocketMQ SubscriptionGroupManager).

Owns: group name -> SubscriptionGroupConfig, auto-creation of unknown groups
with RocketMQ's defaults (``autoCreateSubscriptionGroup``), the groups every
broker knows from the start, the DataVersion and the JSON form of
``config/subscriptionGroup.json``.

No I/O of its own; every change calls the change listeners (persist).
"""

from __future__ import annotations

import logging

from apogee._util.clock import Clock
from apogee.broker.versioned import VersionedTable
from apogee.model.group import SubscriptionGroupConfig
from apogee.model.topic import validate_group
from apogee.protocol.bodies import (
    SubscriptionGroupWrapper,
    decode_subscription_group_wrapper,
    encode_subscription_group_wrapper,
)

log = logging.getLogger(__name__)

#: Groups RocketMQ's tools and proxies use; present on every broker.
SYSTEM_GROUPS = (
    "TOOLS_CONSUMER",
    "FILTERSRV_CONSUMER",
    "SELF_TEST_C_GROUP",
    "CID_ONS-HTTP-PROXY",
    "CID_ONSAPI_PULL",
    "CID_ONSAPI_PERMISSION",
    "CID_ONSAPI_OWNER",
)


class SubscriptionGroupManager(VersionedTable):
    def __init__(self, clock: Clock, *, auto_create: bool = True) -> None:
        super().__init__(clock, "subscription group")
        self.auto_create = auto_create
        self.table: dict[str, SubscriptionGroupConfig] = {
            name: SubscriptionGroupConfig(name) for name in SYSTEM_GROUPS
        }

    def load(self, data: bytes | None) -> None:
        if not data:
            return
        wrapper = decode_subscription_group_wrapper(data)
        self.table.update(wrapper.subscription_group_table)
        self._loaded(wrapper.data_version)

    def encode(self) -> bytes:
        return encode_subscription_group_wrapper(
            SubscriptionGroupWrapper(dict(self.table), self.data_version)
        )

    def get(self, group: str) -> SubscriptionGroupConfig | None:
        return self.table.get(group)

    def find_or_create(self, group: str) -> SubscriptionGroupConfig | None:
        """The group's config; a default one is created when auto-creation is on."""
        config = self.table.get(group)
        if config is not None or not self.auto_create:
            return config
        problem = validate_group(group)
        if problem is not None:
            log.warning("not creating subscription group: %s", problem)
            return None
        config = self.table[group] = SubscriptionGroupConfig(group)
        log.info("auto-created subscription group %s", group)
        self._changed()
        return config

    def update(self, config: SubscriptionGroupConfig) -> None:
        if self.table.get(config.group_name) == config:
            return
        self.table[config.group_name] = config
        self._changed()

    def delete(self, group: str) -> bool:
        if self.table.pop(group, None) is None:
            return False
        self._changed()
        return True

    def adopt(self, wrapper: SubscriptionGroupWrapper) -> bool:
        """Take a master's groups and their version (a slave's copy); False when the
        version is the one held already."""
        if not self._adopting(wrapper.data_version):
            return False
        self.table = dict(wrapper.subscription_group_table)
        self._notify()
        return True

    def notify_enabled(self, group: str) -> bool:
        """Whether consumers of ``group`` hear about membership changes."""
        config = self.table.get(group)
        return config is None or config.notify_consumer_ids_changed_enable
