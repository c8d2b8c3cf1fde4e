"""The JSON of allocation requests, written as text, is the JSON of the
same requests as dicts, at every body format."""

from __future__ import annotations

import orjson
import pytest

from placement.candidates.answers import AllocationRequest, OneProviderRequest, SpreadRequest
from placement.handlers import allocation_candidate

SHARED = {"DISK_GB": 20, "MEMORY_MB": 2048, "VCPU": 2}
ITEMS = [
    # one provider, the resources shared with the next requests (a lone group)
    OneProviderRequest("u1", SHARED, ""),
    OneProviderRequest("u2", SHARED, ""),
    OneProviderRequest("u9", SHARED, "_G"),
    AllocationRequest({"u1": SHARED}, {"": ["u1"]}),
    # one provider taking two granular groups
    AllocationRequest({"u3": {"VCPU": 4}}, {"1": ["u3"], "2": ["u3"]}),
    # a compute and a sharing disk, in one group or two
    AllocationRequest({"u4": {"VCPU": 1}, "u5": {"DISK_GB": 10}}, {"": ["u4", "u5"]}),
    AllocationRequest({"u4": SHARED, "u5": {"DISK_GB": 10}}, {"1": ["u4"], "2": ["u5", "u4"]}),
    # the same spread, as the search makes it: a compute giving two
    # classes, a sharing provider the disk
    SpreadRequest((("u4", {"VCPU": 1, "MEMORY_MB": 512}), ("u5", {"DISK_GB": 10})), "",
                  ("u4", "u5")),
    SpreadRequest((("u5", SHARED),), "_G", ("u5",)),
    # a resourceless group mapped beside a provider giving everything
    AllocationRequest({"u6": {"VGPU": 1}}, {"_G": ["u6"], "_NUMA": ["u7"]}),
    # class names are encoded (uuids and suffixes are written as they are:
    # the schemas admit none needing an escape)
    AllocationRequest({"u8": {"CUSTOM_\u00e9": 1, 'CUSTOM_"\\': 2}}, {"_X": ["u8"]}),
    # nothing at all
    AllocationRequest({}, {}),
]


@pytest.mark.parametrize(("as_dict", "with_mappings"), [(False, False), (True, False),
                                                        (True, True)])
def test_pieces_make_the_json_of_the_dicts(as_dict, with_mappings):
    rendered = allocation_candidate._allocation_requests(ITEMS, as_dict, with_mappings)
    expected = orjson.dumps([_as_dict(item, as_dict, with_mappings) for item in ITEMS])
    assert orjson.dumps(rendered) == expected


def _as_dict(item: AllocationRequest | OneProviderRequest | SpreadRequest, as_dict: bool,
             with_mappings: bool) -> dict:
    """An allocation request's body as the spec gives it."""
    if not as_dict:
        return {"allocations": [{"resource_provider": {"uuid": uuid}, "resources": resources}
                                for uuid, resources in item.allocations.items()]}
    body: dict = {"allocations": {uuid: {"resources": resources}
                                  for uuid, resources in item.allocations.items()}}
    if with_mappings:
        body["mappings"] = item.mappings
    return body
