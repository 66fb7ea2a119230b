"""White-address patterns of ``plain_acl.yml``: which client addresses skip the checks.

Owns: AddressPattern (parse once, match many) with RocketMQ's pattern forms
(RemoteAddressStrategyFactory).

Forms::

    ""  (or missing)          matches nothing
    *   *.*.*.*   *:*:*:*:*:*:*:*
                              matches every address
    192.168.0.1   ::1         one address
    192.168.0.1,192.168.0.2   a list of addresses
    192.168.1.{1,2,3}         the last part from a set
    192.168.1-10.*   10.10.*  ranges: each part a number, "*" or "a-b"
    2001:db8::*:1-ff          (hexadecimal parts for IPv6)

A range pattern compares every part, where RocketMQ looks only at the first
ranged part and ignores those after it; for the documented forms (ranges
and "*" at the end) both agree. An IPv4 range pattern may stop early after
a "*": ``10.10.*`` is ``10.10.*.*``. Client addresses compare in their
canonical form, and an IPv4-mapped IPv6 peer (``::ffff:10.0.0.1``) as the
IPv4 address it carries.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from apogee.errors import ConfigError

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
_Address = Address
_ALL = frozenset({"*", "*.*.*.*", "*:*:*:*:*:*:*:*"})


def canonical(host: str) -> _Address | None:
    """The address a peer connected from, or None if ``host`` is not an IP address."""
    try:
        address = ipaddress.ip_address(host.strip("[]").split("%", 1)[0])
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def _one(text: str, pattern: str) -> _Address:
    address = canonical(text.strip())
    if address is None:
        raise ConfigError(f"white address {pattern!r}: {text.strip()!r} is not an IP address")
    return address


def _range(part: str, pattern: str, *, base: int, top: int) -> tuple[int, int]:
    part = part.strip()
    try:
        if part == "*":
            return 0, top
        if "-" in part:
            low_text, high_text = part.split("-", 1)
            low, high = int(low_text, base), int(high_text, base)
        else:
            low = high = int(part, base)
    except ValueError:
        raise ConfigError(f"white address {pattern!r}: bad part {part!r}") from None
    if not 0 <= low <= high <= top:
        raise ConfigError(f"white address {pattern!r}: part {part!r} is outside 0..{top}")
    return low, high


def _v6_parts(pattern: str) -> list[str]:
    if "::" in pattern:
        head, tail = pattern.split("::", 1)
        left = head.split(":") if head else []
        right = tail.split(":") if tail else []
        missing = 8 - len(left) - len(right)
        if missing < 1:
            raise ConfigError(f"white address {pattern!r}: too many parts")
        return [*left, *(["0"] * missing), *right]
    return pattern.split(":")


@dataclass(frozen=True, slots=True)
class AddressPattern:
    text: str
    everything: bool = False
    addresses: frozenset[_Address] = frozenset()
    # per part (low, high) for a range pattern; ``v6`` tells which family it covers
    ranges: tuple[tuple[int, int], ...] = ()
    v6: bool = False

    @classmethod
    def parse(cls, text: str | None) -> AddressPattern:
        """Parse one pattern; ConfigError names the pattern and the bad part."""
        pattern = (text or "").strip()
        if not pattern:
            return cls("")
        if pattern in _ALL:
            return cls(pattern, everything=True)
        if pattern.endswith("}"):
            head, brace, options = pattern.rpartition("{")
            if not brace or not head or head[-1] not in ".:":
                raise ConfigError(f"white address {pattern!r}: a set must be the last part")
            items = options[:-1].split(",")
            return cls(pattern, addresses=frozenset(_one(head + i, pattern) for i in items))
        if "," in pattern:
            return cls(pattern, addresses=frozenset(_one(i, pattern) for i in pattern.split(",")))
        if "*" in pattern or "-" in pattern:
            return cls._parse_range(pattern)
        return cls(pattern, addresses=frozenset({_one(pattern, pattern)}))

    @classmethod
    def _parse_range(cls, pattern: str) -> AddressPattern:
        if ":" in pattern:
            parts = _v6_parts(pattern)
            if len(parts) != 8:
                raise ConfigError(f"white address {pattern!r}: an IPv6 pattern has 8 parts")
            ranges = tuple(_range(p, pattern, base=16, top=0xFFFF) for p in parts)
            return cls(pattern, ranges=ranges, v6=True)
        parts = pattern.split(".")
        if len(parts) < 4 and parts[-1].strip() == "*":
            parts += ["*"] * (4 - len(parts))
        if len(parts) != 4:
            raise ConfigError(f"white address {pattern!r}: an IPv4 pattern has 4 parts")
        return cls(pattern, ranges=tuple(_range(p, pattern, base=10, top=255) for p in parts))

    def matches(self, address: _Address | None) -> bool:
        if self.everything:
            return True
        if address is None:
            return False
        if self.ranges:
            if isinstance(address, ipaddress.IPv6Address) != self.v6:
                return False
            packed = address.packed
            if self.v6:
                values = [int.from_bytes(packed[i : i + 2], "big") for i in range(0, 16, 2)]
            else:
                values = list(packed)
            return all(low <= v <= high for v, (low, high) in zip(values, self.ranges, strict=True))
        return address in self.addresses
