"""The osc-placement story (tests/fixtures/osc_story.py) against a running
placement-api of this checkout."""

from __future__ import annotations

import pytest

from tests.fixtures.clients import RunningServer
from tests.fixtures.osc_story import OscStory

pytestmark = pytest.mark.slow


class TestPlacementApi(OscStory):
    @pytest.fixture(scope="class")
    @classmethod
    def endpoint(cls):
        with RunningServer() as running:
            yield running.url
