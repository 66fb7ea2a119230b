"""What a consumer group subscribes to: topic plus tag expression.

Owns: SubscriptionData and the TAG expression grammar of RocketMQ's
FilterAPI (``"TagA || TagB"``; ``"*"`` or empty means every message).

Invariants: ``code_set`` holds the Java ``String.hashCode`` of each tag in
``tags_set``, in the same order; a subscription to everything has
``sub_string == "*"`` and both sets empty. An expression longer than
``MAX_TAG_EXPRESSION_LENGTH`` characters is refused (TagExpressionError):
parsing is linear, but a request carrying one still costs every later
message a look-up, and no real subscription comes near it. ``sub_version`` is a millisecond
timestamp chosen by the client (passed in, this layer reads no clock).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from apogee.errors import TagExpressionError
from apogee.model.javahash import java_string_hash

SUB_ALL = "*"
EXPRESSION_TAG = "TAG"
EXPRESSION_SQL92 = "SQL92"
#: the longest tag expression taken (thousands of tags)
MAX_TAG_EXPRESSION_LENGTH = 64 * 1024


def is_tag_type(expression_type: str | None) -> bool:
    """RocketMQ ExpressionType.isTagType: TAG, or no type at all (older clients, C++)."""
    return not expression_type or expression_type == EXPRESSION_TAG


def parse_tag_expression(expression: str | None) -> tuple[tuple[str, ...], tuple[int, ...]]:
    """Tags and their hash codes of ``"A || B"``; empty tuples for everything."""
    if expression is None or not expression.strip() or expression.strip() == SUB_ALL:
        return (), ()
    if len(expression) > MAX_TAG_EXPRESSION_LENGTH:
        raise TagExpressionError(
            f"tag expression of {len(expression)} characters, the limit is "
            f"{MAX_TAG_EXPRESSION_LENGTH}"
        )
    # A dict keeps the first occurrence of each tag, in order, in linear time.
    tags = tuple(dict.fromkeys(tag for part in expression.split("||") if (tag := part.strip())))
    return tags, tuple(java_string_hash(tag) for tag in tags)


@dataclass(frozen=True, slots=True)
class SubscriptionData:
    topic: str
    sub_string: str = SUB_ALL
    tags_set: tuple[str, ...] = ()
    code_set: tuple[int, ...] = ()
    sub_version: int = 0
    expression_type: str = EXPRESSION_TAG
    class_filter_mode: bool = False
    # Look-ups for the per-message checks (a tuple would make each one linear).
    _codes: frozenset[int] = field(init=False, repr=False, compare=False)
    _tags: frozenset[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_codes", frozenset(self.code_set))
        object.__setattr__(self, "_tags", frozenset(self.tags_set))

    @classmethod
    def build(cls, topic: str, expression: str | None, *, sub_version: int = 0) -> SubscriptionData:
        """A TAG subscription of ``topic`` to ``expression``."""
        tags, codes = parse_tag_expression(expression)
        sub_string = SUB_ALL if not tags else (expression or SUB_ALL)
        return cls(topic, sub_string, tags, codes, sub_version)

    @property
    def is_all(self) -> bool:
        return not self.tags_set

    @property
    def code_lookup(self) -> frozenset[int]:
        """``code_set`` for look-ups; one object per subscription, not one per pull."""
        return self._codes

    def matches_code(self, tags_code: int) -> bool:
        """Broker-side filter on the consume-queue tag hash."""
        return self.is_all or tags_code in self._codes

    def matches_tag(self, tag: str | None) -> bool:
        """Client-side re-check on the real tag (hash collisions pass the broker)."""
        return self.is_all or (tag is not None and tag in self._tags)
