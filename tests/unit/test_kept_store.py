"""The bounded store of what candidate requests keep for later ones."""

from placement.candidates.snapshot import KeptStore


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
