"""What the candidate engine keeps between requests: one store per scope,
each entry under a named key.

A key's class (a subclass of ``Key[V]``) names what is kept (``V``, the
type of the value) and its fields what the value was made from, so two
kinds of entries never collide and a reader sees at the key what an entry
depends on. The stores, by scope (each lives exactly as
long as its owner, and its owner is replaced when what it was made from
changes, never edited in place):

* ``ProviderCopy.memo``: what requests derive from a copy's indexes (the
  anchors of a set of classes, the trees in an aggregate). A change
  that moves a provider in the indexes makes a copy with a new memo.
* ``CachedProvider.memo``: what requests derive from one provider record
  (its search record, its tree's members, its summary). A changed
  provider is a new record with a new memo.
* ``ProviderCopy.kept`` (``kept.KeptStore``, one per database): results,
  funnels, whole answers, provider lists and tree views kept across
  copies (a view names the copy it was made of), bounded
  by the sum of their sizes; each entry holds the records (or the copy
  serial, or the change counters) and usages it was made from, for the
  reader to compare with its own.
* ``search.Result.memo`` and the ``rendered`` memo of allocation requests
  and provider summaries: what callers make of a value that never changes.

Copies and provider records follow the provider change record
(``placement.db.provider_changes``), which database triggers write
whoever changes a provider: see the package docstring.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import TYPE_CHECKING, Generic, TypeVar

V = TypeVar("V")
_MISSING = object()

__all__ = ["Key", "Memo", "V"]


class Key(tuple, Generic[V]):
    """The key of an entry of type ``V``: subclass it, one class per kind
    of entry, naming in comments the fields the value is made from, and
    make keys as ``Kind(field, ...)``. A key is the tuple ``(Kind, field,
    ...)``: keys of two kinds never compare equal, and hashing and
    comparing them stays as cheap as for any tuple (providers' memos are
    read thousands of times per request)."""

    __slots__ = ()

    def __new__(cls, *fields: Hashable) -> Key[V]:
        return tuple.__new__(cls, (cls, *fields))


class Memo(dict):
    """Values made once per key while the owner lives; with a ``bound``,
    emptied when full (a bound on the memory of unusual requests: the
    common ones need few entries). Two threads may both make a value;
    either is right, since a value depends on its key and owner only.

    A dict, so that ``get`` (the value kept for a key, or None; use
    ``get_or_make`` for values that may be None) is the dict's own: the
    hot paths read memos thousands of times per request. Write through
    ``put`` only, which keeps the bound."""

    __slots__ = ("_bound",)

    def __init__(self, bound: int | None = None) -> None:
        super().__init__()
        self._bound = bound

    if TYPE_CHECKING:
        def get(self, key: Key[V]) -> V | None: ...

    def put(self, key: Key[V], value: V) -> V:
        if self._bound is not None and len(self) >= self._bound:
            self.clear()
        self[key] = value
        return value

    def get_or_make(self, key: Key[V], make: Callable[[], V]) -> V:
        value = dict.get(self, key, _MISSING)
        if value is _MISSING:
            value = self.put(key, make())
        return value  # type: ignore[return-value]
