"""The hub the Go harness (sdk/python/sdktest) started for these tests."""

from __future__ import annotations

import os
import unittest
import urllib.request
import uuid

HUB = os.environ.get("AGENTD_TEST_HUB", "")
TOKEN = os.environ.get("AGENTD_TEST_TOKEN", "")
MACHINE = os.environ.get("AGENTD_TEST_MACHINE", "")
CONTROL = os.environ.get("AGENTD_TEST_CONTROL", "")
SANDBOX = os.environ.get("AGENTD_TEST_SANDBOX", "") == "1"

NO_HUB = "no test hub: run these through 'make test-python' (go test ./sdk/python/sdktest), which starts one"
NO_SANDBOX = "no builtin sandbox: the Docker engine lacks ghcr.io/devdepot-ai/sandbox-base:1 (make sandbox-base)"


def need_hub(case: unittest.TestCase) -> None:
    """Skips case unless the harness started a hub."""
    if not (HUB and TOKEN and MACHINE):
        case.skipTest(NO_HUB)


def need_sandbox(case: unittest.TestCase) -> None:
    """Skips case unless the hub runs builtin sandboxes."""
    need_hub(case)
    if not SANDBOX:
        case.skipTest(NO_SANDBOX)


def conversation() -> str:
    """A new conversation id: a new sandbox."""
    return "c-py-" + uuid.uuid4().hex[:10]


def kill_hub() -> None:
    """SIGKILLs the hub and starts it again (returns once it is healthy)."""
    req = urllib.request.Request(CONTROL + "/kill-hub", method="POST")
    with urllib.request.urlopen(req, timeout=60) as resp:
        resp.read()
