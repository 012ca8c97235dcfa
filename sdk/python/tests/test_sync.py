"""The blocking client against a real hub, paired agentd and builtin sandbox."""

from __future__ import annotations

import sys
import time
import unittest
import uuid
from typing import List

import agentd
from tests import _env


def split(events: List[agentd.Event]) -> "tuple[bytes, bytes, List[agentd.Exit]]":
    out, err, exits = b"", b"", []
    for ev in events:
        if isinstance(ev, agentd.Output):
            if ev.stream == "stderr":
                err += ev.data
            else:
                out += ev.data
        elif isinstance(ev, agentd.Exit):
            exits.append(ev)
    return out, err, exits


class Commands:
    """Tests every target passes; subclasses set up self.box."""

    hub: agentd.Hub
    box: agentd.Target

    def assertions(self) -> unittest.TestCase:
        assert isinstance(self, unittest.TestCase)
        return self

    def test_streams_in_order_then_exit(self) -> None:
        t = self.assertions()
        events = list(
            self.box.sh("for i in $(seq 1 200); do echo out$i; echo err$i >&2; done; exit 3")
        )
        out, err, exits = split(events)
        t.assertEqual(out.decode(), "".join(f"out{i}\n" for i in range(1, 201)))
        t.assertEqual(err.decode(), "".join(f"err{i}\n" for i in range(1, 201)))
        t.assertIsInstance(events[-1], agentd.Exit, "the exit is the last event")
        t.assertEqual(len(exits), 1)
        t.assertEqual(exits[0].exit_code, 3)
        # Offsets are contiguous per stream: nothing lost or repeated.
        nxt = {"stdout": 0, "stderr": 0}
        for ev in events:
            if isinstance(ev, agentd.Output):
                t.assertEqual(ev.offset, nxt[ev.stream], f"{ev.stream} offset")
                nxt[ev.stream] += len(ev.data)

    def test_output_is_live(self) -> None:
        t = self.assertions()
        # The command waits for a file the test writes only after it has seen
        # the first line: the line must arrive while the command runs.
        name = "live-" + uuid.uuid4().hex
        proc = self.box.sh(f"echo first; while [ ! -e {name} ]; do sleep 0.05; done; echo second; rm {name}", timeout=30)
        it = iter(proc)
        first = next(it)
        t.assertIsInstance(first, agentd.Output)
        t.assertEqual(first.text, "first\n")
        self.box.files.write(name, "")
        rest = list(it)
        t.assertEqual("".join(ev.text for ev in rest), "second\n")
        t.assertEqual(proc.exit and proc.exit.exit_code, 0)

    def test_exit_codes(self) -> None:
        t = self.assertions()
        for argv, want in [
            (["true"], 0),
            (["false"], 1),
            (["sh", "-c", "exit 42"], 42),
            (["sh", "-c", "kill -KILL $$"], 128 + 9),
            (["sh", "-c", "kill -TERM $$"], 128 + 15),
        ]:
            with t.subTest(argv=argv):
                res = self.box.exec(argv).wait()
                t.assertEqual(res.exit_code, want)

    def test_timeout_is_124(self) -> None:
        t = self.assertions()
        res = self.box.exec(["sleep", "60"], timeout=1, grace=1).wait()
        t.assertEqual(res.exit_code, agentd.EXIT_TIMEOUT)
        t.assertTrue(res.exit.timed_out)
        t.assertLess(res.exit.duration, 30)

    def test_stdin_env_cwd(self) -> None:
        t = self.assertions()
        self.box.files.mkdir("sub")
        res = self.box.sh('cat; echo "$GREETING"; pwd', stdin="in\n", env={"GREETING": "hello"}, cwd="sub").wait()
        lines = res.text.splitlines()
        t.assertEqual(lines[:2], ["in", "hello"])
        t.assertTrue(lines[2].endswith("/sub"), lines[2])

    def test_kill_signal_attach(self) -> None:
        t = self.assertions()
        proc = self.box.sh("trap 'echo got-int' INT; echo ready; while :; do sleep 0.1; done")
        first = next(iter(proc))
        t.assertEqual(first.text, "ready\n")
        # A second follower replays from the start.
        other = self.box.attach(proc.id)
        t.assertEqual(other.id, proc.id)
        t.assertEqual(next(iter(other)).text, "ready\n")
        ids = [p.id for p in self.box.ps()]
        t.assertIn(proc.id, ids)
        proc.signal("INT")
        t.assertEqual(next(iter(proc)).text, "got-int\n")
        self.box.kill(proc.id, "KILL")
        res = proc.wait()
        t.assertEqual(res.exit_code, 128 + 9)
        t.assertEqual(res.exit.signal, "KILL")
        # attach from an offset skips what came before it.
        late = self.box.attach(proc.id, from_offset=len("ready\n")).wait()
        t.assertEqual(late.text, "got-int\n")
        t.assertEqual(late.exit_code, 128 + 9)
        t.assertEqual(self.box.wait(proc.id).exit_code, 128 + 9)

    def test_files(self) -> None:
        t = self.assertions()
        d = "files-" + uuid.uuid4().hex[:8]
        w = self.box.files.write(f"{d}/notes.md", "a\nb\na\n")
        t.assertEqual(w.size, 6)
        t.assertEqual(self.box.files.read_text(f"{d}/notes.md"), "a\nb\na\n")
        t.assertEqual(self.box.files.read(f"{d}/notes.md", offset=2, limit=1), b"b")
        with t.assertRaises(agentd.FailedPrecondition) as ctx:
            self.box.files.edit(f"{d}/notes.md", old="a", new="x")
        t.assertIn("2 times", ctx.exception.message)
        e = self.box.files.edit(f"{d}/notes.md", old="b", new="B")
        t.assertEqual(e.replacements, 1)
        t.assertIn("+B", e.diff)
        with t.assertRaises(agentd.NotFound):
            self.box.files.edit(f"{d}/notes.md", old="zzz", new="y")
        with t.assertRaises(agentd.FailedPrecondition):
            self.box.files.write(f"{d}/notes.md", "other", expected_sha256="0" * 64)
        t.assertEqual(self.box.files.read_text(f"{d}/notes.md"), "a\nB\na\n", "a refused write changes nothing")
        lines = self.box.files.lines(f"{d}/notes.md", from_line=2, count=1)
        t.assertEqual(list(lines.lines), ["B"])
        t.assertEqual(lines.total_lines, 3)
        t.assertEqual([i.name for i in self.box.files.list(d)], ["notes.md"])
        t.assertEqual(self.box.files.stat(f"{d}/notes.md").size, 6)
        globbed = self.box.files.glob("**/*.md", d)
        t.assertEqual(len(globbed), 1)
        t.assertTrue(globbed[0].endswith(f"/{d}/notes.md"), globbed)
        found = self.box.files.search("B", d, fixed_string=True)
        t.assertEqual([m.line for m in found.matches], ["B"])
        self.box.files.move(f"{d}/notes.md", f"{d}/n2.md")
        t.assertFalse(self.box.files.exists(f"{d}/notes.md"))
        with t.assertRaises(agentd.NotFound) as nf:
            self.box.files.read(f"{d}/missing")
        t.assertEqual(nf.exception.code.name, "NOT_FOUND")
        self.box.files.remove(d, recursive=True)
        t.assertFalse(self.box.files.exists(d))

    def test_python(self) -> None:
        t = self.assertions()
        s = "s-" + uuid.uuid4().hex[:8]
        r = self.box.python("x = 41\nprint('hi')", session=s)
        t.assertEqual(r.stdout, "hi\n")
        t.assertTrue(r.ok)
        r = self.box.python("x + 1", session=s)
        t.assertEqual(r.result, "42")
        r = self.box.python("1/0")
        t.assertFalse(r.ok)
        t.assertIsNotNone(r.error)
        assert r.error is not None
        t.assertEqual(r.error.name, "ZeroDivisionError")
        r = self.box.python("import time; time.sleep(30)", session=s, timeout=1)
        t.assertTrue(r.timed_out)
        t.assertEqual(self.box.python("x", session=s).result, "41", "the session survives a timeout")
        self.box.python_close(s)

    def test_snapshot(self) -> None:
        t = self.assertions()
        d = "snap-" + uuid.uuid4().hex[:8]
        self.box.files.write(f"{d}/a.txt", "one")
        snap = self.box.snapshot.create(d, label="before")
        t.assertEqual(snap.label, "before")
        t.assertIn(snap.id, [s.id for s in self.box.snapshot.list()])
        self.box.files.write(f"{d}/a.txt", "two")
        self.box.files.write(f"{d}/b.txt", "new")
        changes = {c.path: c.kind for c in self.box.snapshot.diff(snap.id)}
        t.assertEqual(sorted(changes), ["a.txt", "b.txt"])
        summary = self.box.snapshot.restore(snap.id, delete_extra=True)
        t.assertEqual(summary.files_written, 1)
        t.assertEqual(self.box.files.read_text(f"{d}/a.txt"), "one")
        t.assertFalse(self.box.files.exists(f"{d}/b.txt"))
        tar = self.box.snapshot.export(snap.id)
        t.assertIn(b"a.txt", tar[:512], "a tar archive whose first entry is a.txt")
        self.box.snapshot.delete(snap.id)
        with t.assertRaises(agentd.NotFound):
            self.box.snapshot.get(snap.id)

    def test_bad_input_is_refused_before_a_call(self) -> None:
        t = self.assertions()
        with t.assertRaises(TypeError):
            self.box.exec("ls -la")
        with t.assertRaises(ValueError):
            self.box.exec([])
        with t.assertRaises(ValueError):
            self.box.exec(["true"], timeout=-1)


class MachineTest(Commands, unittest.TestCase):
    """Through the hub to the paired machine."""

    def setUp(self) -> None:
        _env.need_hub(self)
        self.hub = agentd.Hub(_env.HUB, token=_env.TOKEN)
        self.addCleanup(self.hub.close)
        self.box = self.hub.machine(_env.MACHINE)

    def test_info(self) -> None:
        info = self.box.info()
        self.assertEqual(info.mode, "machine")


class SandboxTest(Commands, unittest.TestCase):
    """Through the hub to a builtin sandbox, one per test's conversation."""

    def setUp(self) -> None:
        _env.need_sandbox(self)
        self.hub = agentd.Hub(_env.HUB, token=_env.TOKEN)
        self.addCleanup(self.hub.close)
        self.box = self.hub.sandbox(env="builtin", conversation=_env.conversation())

    def test_info(self) -> None:
        info = self.box.info()
        self.assertEqual(info.mode, "sandbox")
        self.assertEqual(info.workspace, "/workspace")


class ErrorsTest(unittest.TestCase):
    """Errors carry the status code and the server's message."""

    def setUp(self) -> None:
        _env.need_hub(self)

    def test_bad_token(self) -> None:
        with agentd.Hub(_env.HUB, token="not-a-token") as hub:
            with self.assertRaises(agentd.Unauthenticated) as ctx:
                hub.machine(_env.MACHINE).exec(["true"])
        self.assertEqual(ctx.exception.code.name, "UNAUTHENTICATED")
        self.assertTrue(ctx.exception.message, "the server's message is kept")

    def test_unknown_machine(self) -> None:
        with agentd.Hub(_env.HUB, token=_env.TOKEN) as hub:
            with self.assertRaises(agentd.NotFound) as ctx:
                hub.machine("m-doesnotexist").exec(["true"])
            self.assertIn("m-doesnotexist", ctx.exception.message)
            with self.assertRaises(agentd.NotFound):
                hub.machine("m-doesnotexist").files.read("x")

    def test_no_token(self) -> None:
        with self.assertRaises(ValueError) as ctx:
            agentd.Hub(_env.HUB, token="")
        self.assertIn("AGENTD_TOKEN", str(ctx.exception))

    def test_bad_url(self) -> None:
        for url in ["hub.example.com", "ftp://x", "http://"]:
            with self.subTest(url=url), self.assertRaises(ValueError):
                agentd.Hub(url, token="t")


class ReattachTest(unittest.TestCase):
    """The chaos scenario of the Go tests: the hub is SIGKILLed mid-stream
    and started again; the stream reattaches and loses or repeats nothing."""

    def setUp(self) -> None:
        _env.need_hub(self)
        if not _env.CONTROL:
            self.skipTest(_env.NO_HUB)
        self.hub = agentd.Hub(_env.HUB, token=_env.TOKEN)
        self.addCleanup(self.hub.close)

    def test_reattach_after_hub_killed(self) -> None:
        self.reattach(self.hub.machine(_env.MACHINE))

    def test_reattach_in_sandbox_after_hub_killed(self) -> None:
        if not _env.SANDBOX:
            self.skipTest(_env.NO_SANDBOX)
        box = self.hub.sandbox(env="builtin", conversation=_env.conversation())
        box.exec(["true"]).wait()  # the sandbox is up before the clock starts
        self.reattach(box)

    def reattach(self, box: agentd.Target) -> None:
        n = 80
        proc = box.sh(f"for i in $(seq 1 {n}); do echo line$i; echo e$i >&2; sleep 0.1; done; exit 5")
        out, err = b"", b""
        killed = False
        killed_at, resumed_at = 0.0, 0.0
        for ev in proc:
            if killed and not resumed_at:
                resumed_at = time.monotonic()
            if isinstance(ev, agentd.Output):
                if ev.stream == "stderr":
                    err += ev.data
                else:
                    out += ev.data
                if not killed and out.count(b"\n") >= 5:
                    t0 = time.monotonic()
                    _env.kill_hub()
                    killed_at = time.monotonic()
                    killed = True
        self.assertTrue(killed)
        print(f"\n  hub killed and restarted in {killed_at - t0:.2f}s; output resumed {resumed_at - killed_at:.2f}s later",
              file=sys.stderr)
        self.assertGreaterEqual(proc.reattached, 1, "the stream was cut and reattached")
        self.assertEqual(out.decode(), "".join(f"line{i}\n" for i in range(1, n + 1)))
        self.assertEqual(err.decode(), "".join(f"e{i}\n" for i in range(1, n + 1)))
        self.assertIsNotNone(proc.exit)
        assert proc.exit is not None
        self.assertEqual(proc.exit.exit_code, 5)


if __name__ == "__main__":
    unittest.main()
