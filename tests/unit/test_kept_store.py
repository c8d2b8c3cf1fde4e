"""The bounded store of what candidate requests keep for later ones."""

from placement.candidates.kept import KeptStore


def _noting_emptied_memos(capacity: int) -> tuple[KeptStore, list[bool]]:
    """A store of ``capacity`` bytes, and the list it notes each emptying
    of the memos in."""
    emptied: list[bool] = []
    return KeptStore(capacity=capacity, empty_memos=lambda: emptied.append(True)), emptied


def test_the_least_recently_used_go_first_when_the_sizes_pass_the_bound():
    store = KeptStore(capacity=10)
    store.put("a", "A", 4)
    store.put("b", "B", 4)
    assert store.get("a") == "A"  # now "b" is the least recently used
    store.put("c", "C", 4)
    assert store.get("b") is None
    assert (store.get("a"), store.get("c")) == ("A", "C")


def test_putting_a_key_again_replaces_its_size():
    store = KeptStore(capacity=10)
    store.put("a", "A", 9)
    store.put("a", "A2", 1)
    store.put("b", "B", 9)
    assert (store.get("a"), store.get("b")) == ("A2", "B")
    store.put("c", "C", 11)  # larger than the bound: nothing stays
    assert [store.get(key) for key in "abc"] == [None, None, None]


def test_providers_memos_count_against_the_bound_and_are_emptied_past_half_of_it():
    store, emptied = _noting_emptied_memos(10)
    store.put("a", "A", 4)
    store.count_memo(3)
    assert (store.size, emptied) == (7, [])
    store.put("b", "B", 4)  # the entries and the memos together pass the bound
    assert (store.get("a"), store.get("b"), store.size, emptied) == (None, "B", 7, [])
    store.count_memo(3)  # past half of the bound: every memo is emptied
    assert (store.get("b"), store.size, emptied) == ("B", 4, [True])


def test_a_smaller_bound_empties_the_memos_it_no_longer_holds():
    store, emptied = _noting_emptied_memos(10)
    store.count_memo(4)
    store.resize(6)
    assert (store.size, emptied) == (0, [True])


def test_a_floor_lets_the_memos_of_a_large_cloud_stay_and_the_entries_keep_half():
    store, emptied = _noting_emptied_memos(10)
    store.allow_memos(8)
    store.count_memo(7)  # past half of the bound, within the floor
    store.put("a", "A", 5)  # the entries keep their half
    assert (store.get("a"), emptied) == ("A", [])
    store.put("b", "B", 1)
    assert (store.get("a"), store.get("b"), emptied) == (None, "B", [])
    store.count_memo(2)  # past the floor
    assert (store.size, emptied) == (1, [True])


def test_no_floor_keeps_memos_when_the_bound_is_nothing():
    store, emptied = _noting_emptied_memos(0)
    store.allow_memos(8)
    store.count_memo(1)
    assert (store.size, emptied) == (0, [True])
