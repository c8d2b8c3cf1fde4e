"""The candidate engine's memo: named keys, bounds, values that are None."""

from placement.candidates.memo import Key, Memo


class _Roots(Key[frozenset]):
    # name: str
    __slots__ = ()


class _Members(Key[frozenset]):
    # name: str
    __slots__ = ()


def test_keys_of_two_kinds_with_equal_fields_are_two_entries():
    memo = Memo()
    memo.put(_Roots("a"), frozenset({1}))
    memo.put(_Members("a"), frozenset({2}))
    assert memo.get(_Roots("a")) == {1}
    assert memo.get(_Members("a")) == {2}
    assert len(memo) == 2


def test_a_value_is_made_once_even_when_it_is_none():
    memo, made = Memo(), []

    def make():
        made.append(1)

    assert memo.get_or_make(_Roots("x"), make) is None
    assert memo.get_or_make(_Roots("x"), make) is None
    assert made == [1]


def test_a_bounded_memo_empties_when_full():
    memo = Memo(bound=2)
    memo.put(_Roots("a"), frozenset())
    memo.put(_Roots("b"), frozenset())
    memo.put(_Roots("c"), frozenset())
    assert len(memo) == 1
    assert memo.get(_Roots("a")) is None
    assert memo.get(_Roots("c")) == frozenset()
