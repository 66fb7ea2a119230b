"""The broker's own permission (``brokerPermission``), changeable at run time.

Owns: one mutable cell shared by the send, send-back and pull handlers and
the registrar, so UPDATE_BROKER_CONFIG takes effect everywhere at once.

This is how an operator drains a broker before maintenance, as with
RocketMQ: ``updateBrokerConfig -k brokerPermission -v 4`` makes the broker
refuse sends with NO_PERMISSION, and its next registration reports every
topic without the write bit, so clients stop routing sends to it (the name
server's own WIPE_WRITE_PERM_OF_BROKER does the same on the name-server
side, until the broker registers a changed topic version).
"""

from __future__ import annotations

import dataclasses

from apogee.errors import ConfigError
from apogee.model.route import PERM_RW, perm_is_valid, readable, writeable
from apogee.protocol.bodies import TopicConfigWrapper


class BrokerPermission:
    __slots__ = ("value",)

    def __init__(self, value: int = PERM_RW) -> None:
        self.value = _checked(value)

    @property
    def writeable(self) -> bool:
        return writeable(self.value)

    @property
    def readable(self) -> bool:
        return readable(self.value)

    def set(self, value: int) -> None:
        self.value = _checked(value)

    def mask(self, wrapper: TopicConfigWrapper) -> TopicConfigWrapper:
        """Topic configs as registered: each perm ANDed with the broker's when it lacks R or W."""
        if self.writeable and self.readable:
            return wrapper
        table = {
            name: dataclasses.replace(config, perm=config.perm & self.value)
            for name, config in wrapper.topic_config_table.items()
        }
        return dataclasses.replace(wrapper, topic_config_table=table)


def _checked(value: int) -> int:
    if not perm_is_valid(value):
        raise ConfigError(f"brokerPermission must be 0..7, got {value}")
    return value
