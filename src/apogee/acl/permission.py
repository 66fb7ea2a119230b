"""Permission bits of an account on a topic or group, and the rule that compares them.

Owns: Perm (RocketMQ's Permission: DENY 1, ANY 2, PUB 4, SUB 8), parsing the
perm words of ``plain_acl.yml`` and the rule ``allows(needed, owned)``.

The rule (Permission.checkPermission): an owned DENY refuses everything; a
need of ANY is met by PUB or SUB; otherwise the needed bit must be owned.
Perm words are ``DENY``, ``PUB``, ``SUB``, ``PUB|SUB`` and ``SUB|PUB``.
RocketMQ reads any other word as DENY; here it is refused with its name, so
a typo never locks an account out without a word.
"""

from __future__ import annotations

from enum import IntFlag

from apogee.errors import ConfigError


class Perm(IntFlag):
    NONE = 0
    DENY = 1
    ANY = 2
    PUB = 4
    SUB = 8


_WORDS = {
    "DENY": Perm.DENY,
    "PUB": Perm.PUB,
    "SUB": Perm.SUB,
    "PUB|SUB": Perm.PUB | Perm.SUB,
    "SUB|PUB": Perm.PUB | Perm.SUB,
}


def parse_perm(word: str | None, *, what: str) -> Perm:
    """``"PUB|SUB"`` -> Perm; None (not given) is DENY, as in RocketMQ."""
    if word is None:
        return Perm.DENY
    perm = _WORDS.get(str(word).strip())
    if perm is None:
        raise ConfigError(f"{what}: {word!r} is not a permission (DENY, PUB, SUB or PUB|SUB)")
    return perm


def perm_word(perm: Perm) -> str:
    if perm & Perm.DENY:
        return "DENY"
    words = [name for name, bit in (("PUB", Perm.PUB), ("SUB", Perm.SUB)) if perm & bit]
    return "|".join(words) or "DENY"


def allows(needed: Perm, owned: Perm) -> bool:
    if owned & Perm.DENY:
        return False
    if needed & Perm.ANY:
        return bool(owned & (Perm.PUB | Perm.SUB))
    return bool(needed & owned)


def parse_resource_perms(items: object, *, what: str) -> dict[str, Perm]:
    """``["topicA=PUB", "topicB=SUB|PUB"]`` -> {name: perm}; each item must be ``name=PERM``."""
    if items is None:
        return {}
    if not isinstance(items, list):
        raise ConfigError(f"{what} must be a list of 'name=PERM' items, got {items!r}")
    out: dict[str, Perm] = {}
    for item in items:
        name, sep, word = str(item).partition("=")
        if not sep or not name.strip() or "=" in word:
            raise ConfigError(f"{what}: {item!r} is not 'name=PERM' (for example topicA=SUB)")
        out[name.strip()] = parse_perm(word, what=f"{what} {name.strip()}")
    return out
