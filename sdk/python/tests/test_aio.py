"""agentd.aio against a real hub, paired agentd and builtin sandbox."""

from __future__ import annotations

import asyncio
import unittest
import uuid

import agentd
import agentd.aio
from tests import _env


class AioMachineTest(unittest.IsolatedAsyncioTestCase):
    """The asyncio client through the hub to the paired machine."""

    async def asyncSetUp(self) -> None:
        _env.need_hub(self)
        self.hub = agentd.aio.Hub(_env.HUB, token=_env.TOKEN)
        self.box = self.hub.machine(_env.MACHINE)

    async def asyncTearDown(self) -> None:
        await self.hub.close()

    async def test_exec_streams_then_exit(self) -> None:
        proc = await self.box.sh("for i in $(seq 1 100); do echo out$i; echo err$i >&2; done; exit 7")
        out, err = b"", b""
        events = []
        async for ev in proc:
            events.append(ev)
            if isinstance(ev, agentd.Output):
                if ev.stream == "stderr":
                    err += ev.data
                else:
                    out += ev.data
        self.assertEqual(out.decode(), "".join(f"out{i}\n" for i in range(1, 101)))
        self.assertEqual(err.decode(), "".join(f"err{i}\n" for i in range(1, 101)))
        self.assertIsInstance(events[-1], agentd.Exit)
        self.assertEqual(proc.exit and proc.exit.exit_code, 7)

    async def test_timeout_is_124(self) -> None:
        res = await (await self.box.exec(["sleep", "60"], timeout=1, grace=1)).wait()
        self.assertEqual(res.exit_code, 124)
        self.assertTrue(res.exit.timed_out)

    async def test_kill_and_attach(self) -> None:
        proc = await self.box.sh("echo ready; sleep 60")
        other = await self.box.attach(proc.id)
        first = await other.__aiter__().__anext__()
        self.assertEqual(first.text, "ready\n")
        await proc.kill("KILL")
        self.assertEqual((await proc.wait()).exit_code, 137)
        self.assertEqual((await other.wait()).exit_code, 137)

    async def test_files_python_snapshot(self) -> None:
        d = "aio-" + uuid.uuid4().hex[:8]
        await self.box.files.write(f"{d}/app.py", "a = 1\n")
        e = await self.box.files.edit(f"{d}/app.py", old="a = 1", new="a = 2")
        self.assertEqual(e.replacements, 1)
        self.assertEqual(await self.box.files.read_text(f"{d}/app.py"), "a = 2\n")
        snap = await self.box.snapshot.create(d, label="before")
        await self.box.files.write(f"{d}/app.py", "broken")
        self.assertEqual([c.path for c in await self.box.snapshot.diff(snap.id)], ["app.py"])
        await self.box.snapshot.restore(snap.id)
        self.assertEqual(await self.box.files.read_text(f"{d}/app.py"), "a = 2\n")
        self.assertIn(b"app.py", (await self.box.snapshot.export(snap.id))[:512])
        self.assertEqual((await self.box.snapshot.get(snap.id)).snapshot.label, "before")
        r = await self.box.python("6 * 7", session="aio")
        self.assertEqual(r.result, "42")
        self.assertIn("aio", [s.name for s in await self.box.python_sessions()])
        await self.box.python_close("aio")
        self.assertTrue(await self.box.files.exists(f"{d}/app.py"))
        self.assertFalse(await self.box.files.exists(f"{d}/nope"))
        with self.assertRaises(agentd.NotFound):
            await self.box.files.read(f"{d}/missing")
        await self.box.files.remove(d, recursive=True)

    async def test_errors(self) -> None:
        with self.assertRaises(agentd.NotFound):
            await self.hub.machine("m-doesnotexist").exec(["true"])
        bad = agentd.aio.Hub(_env.HUB, token="not-a-token")
        try:
            with self.assertRaises(agentd.Unauthenticated):
                await bad.machine(_env.MACHINE).info()
        finally:
            await bad.close()

    async def test_reattach_after_hub_killed(self) -> None:
        if not _env.CONTROL:
            self.skipTest(_env.NO_HUB)
        n = 60
        proc = await self.box.sh(f"for i in $(seq 1 {n}); do echo line$i; sleep 0.1; done")
        out = b""
        killed = False
        async for ev in proc:
            if isinstance(ev, agentd.Output):
                out += ev.data
                if not killed and out.count(b"\n") >= 5:
                    await asyncio.to_thread(_env.kill_hub)
                    killed = True
        self.assertGreaterEqual(proc.reattached, 1)
        self.assertEqual(out.decode(), "".join(f"line{i}\n" for i in range(1, n + 1)))
        self.assertEqual(proc.exit and proc.exit.exit_code, 0)


class AioSandboxTest(unittest.IsolatedAsyncioTestCase):
    """The asyncio client in a builtin sandbox."""

    async def asyncSetUp(self) -> None:
        _env.need_sandbox(self)
        self.hub = agentd.aio.Hub(_env.HUB, token=_env.TOKEN)
        self.box = self.hub.sandbox(env="builtin", conversation=_env.conversation())

    async def asyncTearDown(self) -> None:
        await self.hub.close()

    async def test_exec(self) -> None:
        res = await (await self.box.exec(["sh", "-c", "echo hi; exit 3"])).wait()
        self.assertEqual((res.text, res.exit_code), ("hi\n", 3))
        self.assertEqual((await self.box.info()).mode, "sandbox")
