"""When a limit cuts the answer, the candidates spread over the trees: a
scheduler weighs hosts, not candidates, and a thousand candidates of one
host would leave it one host and no alternates. Randomized, a limit
samples the candidates themselves, not only the trees."""

from __future__ import annotations

import collections

import pytest

from tests.fixtures.base import build_app
from tests.fixtures.provider_api import ProviderApi, in_process

ROOTS = 20
FUNCTIONS = 8  # physical functions per root, each with 8 virtual functions


@pytest.fixture
def wide_trees(database):
    """ROOTS roots without inventory, each with FUNCTIONS children holding
    SRIOV_NET_VF 8; the root of each child, by the child's uuid."""
    client = ProviderApi(in_process(build_app(database)))
    root_of = {}
    for index in range(ROOTS):
        root = client.provider(f"cn{index}")
        for function in range(FUNCTIONS):
            root_of[client.provider(f"cn{index}-pf{function}", root, SRIOV_NET_VF=8)] = root
    return client, root_of


@pytest.mark.parametrize("group_policy", ["none", "isolate"])
def test_a_limit_covers_every_tree_that_fits(wide_trees, group_policy):
    """Four one-unit groups have thousands of candidates in every tree: a
    limit of 1000 takes as many from each tree, not 1000 from the first."""
    client, root_of = wide_trees
    groups = "&".join(f"resources{index}=SRIOV_NET_VF:1" for index in range(1, 5))
    answer = client.candidates(f"{groups}&group_policy={group_policy}&limit=1000")
    per_root = collections.Counter(
        {root_of[function] for function in request["allocations"]}.pop()
        for request in answer["allocation_requests"])
    assert len(answer["allocation_requests"]) == 1000
    assert len(per_root) == ROOTS
    assert set(per_root.values()) == {1000 // ROOTS}
    # the summaries cover the trees of the answer, and nothing else
    assert set(answer["provider_summaries"]) == set(root_of) | set(root_of.values())


def test_a_small_limit_takes_one_candidate_of_each_tree(wide_trees):
    client, root_of = wide_trees
    answer = client.candidates("resources=SRIOV_NET_VF:1&limit=5")
    roots = [root_of[next(iter(request["allocations"]))]
             for request in answer["allocation_requests"]]
    assert len(set(roots)) == 5


@pytest.fixture
def randomized(database):
    """Three roots of four children with one VGPU each, served by a process
    with randomize_allocation_candidates on; the root of each child."""
    client = ProviderApi(in_process(build_app(
        database, {("placement", "randomize_allocation_candidates"): True})))
    root_of = {}
    for index in range(3):
        root = client.provider(f"cn{index}")
        for child in range(4):
            root_of[client.provider(f"cn{index}-gpu{child}", root, VGPU=1)] = root
    return client, root_of


def test_a_randomized_limit_of_one_draws_any_candidate(randomized):
    """Each of the twelve candidates comes up, not only each root's first
    child (with a uniform draw, the chance that one of them is missing
    after 200 draws is below one in ten million)."""
    client, root_of = randomized
    drawn = collections.Counter()
    for _ in range(200):
        (request,) = client.candidates("resources=VGPU:1&limit=1")["allocation_requests"]
        drawn.update(list(request["allocations"]))
    assert set(drawn) == set(root_of)


def test_a_randomized_limit_of_two_mixes_the_trees(randomized):
    client, root_of = randomized
    mixed = 0
    for _ in range(50):
        answer = client.candidates("resources=VGPU:1&limit=2")
        roots = {root_of[next(iter(request["allocations"]))]
                 for request in answer["allocation_requests"]}
        mixed += len(roots) == 2
    assert mixed > 0
