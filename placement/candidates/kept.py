"""What requests keep for later ones, and what keeping costs.

``KeptStore`` bounds, in bytes, what the requests of one database keep:
entries by key (whole answers, funnels, provider lists, first batches of
trees, the tree views of sets of classes), and what they put in provider
records' memos. The sizes are those their keepers give, from the
measured costs below (tests/functional/test_kept_memory.py measures them
again)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable

from placement.candidates.memo import Key, V

# What requests keep between them (KeptStore), in bytes, unless configured
# (``[placement] allocation_candidates_cache_mb``).
KEPT_CAPACITY = 32 * 1024 * 1024
# What the memos may hold per provider of the cloud whatever that bound
# (KeptStore.allow_memos): about what one kind of request derives from a
# provider (find's search record, members and summary sizes).
MEMO_BYTES_PER_PROVIDER = 2048


class KeptStore:
    """What requests keep for later ones, within a bound in bytes on the
    sum of the sizes their keepers give. One per database, shared by its
    copies. Two kinds of keeping count against it:

    * entries, by key (least recently used out first), each holding what
      it was made from, for the reader to check;
    * what requests put in providers' memos (``CachedProvider.memo``: a
      search record, a tree's members, a summary), counted as they are
      put (``count_memo``). Past half of the bound, or past
      ``memo_floor`` when that is more, ``empty_memos`` (the cache's)
      empties every provider's memo and counting starts again. Memos are
      read thousands of times per request: emptying them all, rarely,
      costs less than keeping them in order of use. The floor lets them
      hold what one kind of request derives from every provider of a
      large cloud (``MEMO_BYTES_PER_PROVIDER``): below it, requests of new
      shapes visiting different providers (other filters) emptied them
      every few requests, and each made them all again. The entries keep
      at least half of the bound.
    """

    def __init__(self, capacity: int = KEPT_CAPACITY,
                 empty_memos: Callable[[], None] = lambda: None) -> None:
        self._entries: OrderedDict[Key, tuple[object, int]] = OrderedDict()
        self._entries_size = 0
        self._memos_size = 0
        self._capacity = capacity
        self._empty_memos = empty_memos
        self._memo_floor = 0
        self._lock = threading.Lock()

    @property
    def size(self) -> int:
        """The sum of the sizes counted: the entries' and the memos'."""
        return self._entries_size + self._memos_size

    def get(self, key: Key[V]) -> V | None:
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return None
            self._entries.move_to_end(key)
            return entry[0]

    def put(self, key: Key[V], value: V, size: int) -> None:
        with self._lock:
            previous = self._entries.pop(key, None)
            if previous is not None:
                self._entries_size -= previous[1]
            self._entries[key] = (value, size)
            self._entries_size += size
            self._shrink()

    def keep_once_asked_before(self, key: Key[V | bool], before: V | bool | None,
                               make: Callable[[], tuple[V, int]], mark_size: int) -> None:
        """Keep the value ``make`` gives (with its size) under ``key`` when
        its kind was asked before (``before``: what ``get`` gave for it
        this time, None when nothing), else only mark it as asked (True, of
        ``mark_size``). Most kinds of a scheduler's requests (a flavor with
        its traits and aggregates) come once: keeping each value, to drop it
        unused, cost more than making it again at the second asking."""
        if before is None:
            self.put(key, True, mark_size)
        else:
            self.put(key, *make())

    def count_memo(self, size: int) -> None:
        """``size`` bytes are being put in a provider's memo."""
        with self._lock:
            self._memos_size += size
            self._shrink()

    def resize(self, capacity: int) -> None:
        with self._lock:
            self._capacity = capacity
            self._shrink()

    def allow_memos(self, floor: int) -> None:
        """Let the memos hold ``floor`` bytes even past half of the bound
        (not when the bound is 0: nothing is kept)."""
        with self._lock:
            self._memo_floor = floor
            self._shrink()

    def _shrink(self) -> None:
        """Within the bounds again (the lock held: emptying the memos, which
        touches nothing of the store, holds off the others' gets and puts
        for the few milliseconds it takes, rarely)."""
        half = self._capacity // 2
        if self._memos_size > (max(half, self._memo_floor) if self._capacity else 0):
            self._memos_size = 0
            self._empty_memos()
        while self._entries and (self._entries_size + min(self._memos_size, half)
                                 > self._capacity):
            _, (_, dropped) = self._entries.popitem(last=False)
            self._entries_size -= dropped


# What the kept store's entries cost, in bytes, as measured
# (tests/functional/test_kept_memory.py): an entry with its key; a usage it
# was made with; an allocation request of a kept answer, and a summary it
# lists (the summary is its provider's), each with its share of the
# answer's JSON.
ENTRY_BYTES = 600
USAGE_BYTES = 100
REQUEST_BYTES = 1100
LISTED_BYTES = 300


# What a provider's memo entries cost, in bytes, as measured (the same
# test): a search record (three inventories), a tree's members (and each
# member), a summary with its JSON.
RECORD_BYTES = 400
# per root of a kept batch: its room in the capacities of each class asked
# (two list entries and an int, for a few classes)
BATCH_BYTES = 150
# per provider of a tree view (its entries in the view's dicts, its tree's
# member list and its room)
VIEW_BYTES = 520
MEMBERS_BYTES = 150
MEMBER_BYTES = 10
SUMMARY_BYTES = 1200


def kept_bytes(usages: int) -> int:
    """About what an entry of the kept store holds, in bytes, besides its
    value: itself and the ``usages`` usages it was made with."""
    return ENTRY_BYTES + USAGE_BYTES * usages
