"""The asyncio API mirrors the blocking one (no hub needed)."""

from __future__ import annotations

import inspect
import unittest

import agentd
import agentd.aio


def public(cls: type) -> set[str]:
    return {n for n, _ in inspect.getmembers(cls, inspect.isfunction) if not n.startswith("_")}


class ParityTest(unittest.TestCase):
    def test_same_methods(self) -> None:
        none: "set[str]" = set()
        pairs: "list[tuple[type, type, set[str]]]" = [
            (agentd.Hub, agentd.aio.Hub, none),
            (agentd.Target, agentd.aio.Target, none),
            # The blocking Process can stop following explicitly; an async
            # generator is closed by leaving the async for.
            (agentd.Process, agentd.aio.Process, {"close"}),
            (agentd.Files, agentd.aio.Files, none),
            (agentd.Snapshots, agentd.aio.Snapshots, none),
        ]
        for sync, aio, extra in pairs:
            with self.subTest(cls=sync.__name__):
                self.assertEqual(public(sync) - extra, public(aio) - {"open"})

    def test_async_methods_are_coroutines(self) -> None:
        for cls in (agentd.aio.Target, agentd.aio.Files, agentd.aio.Snapshots):
            for name in public(cls):
                with self.subTest(method=f"{cls.__name__}.{name}"):
                    self.assertTrue(inspect.iscoroutinefunction(getattr(cls, name)))

    def test_errors_carry_code_and_message(self) -> None:
        import grpc

        e = agentd._common.error(grpc.StatusCode.NOT_FOUND, "no such file: x")
        self.assertIsInstance(e, agentd.NotFound)
        self.assertIsInstance(e, agentd.AgentdError)
        self.assertEqual((e.code, e.message, str(e)), (grpc.StatusCode.NOT_FOUND, "no such file: x", "NOT_FOUND: no such file: x"))
        other = agentd._common.error(grpc.StatusCode.DATA_LOSS, "m")
        self.assertIs(type(other), agentd.AgentdError)
