"""The asyncio client: the same API as :mod:`agentd`, with coroutines and
async iterators (on ``grpc.aio``).

    import agentd.aio
    async with agentd.aio.Hub(url, token=tok) as hub:
        box = hub.sandbox(env="builtin", conversation="c-42")
        proc = await box.exec(["pytest", "-q"], timeout=600)
        async for ev in proc:
            await send_to_chat(ev.text)
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, AsyncIterator, List, Mapping, Optional, Sequence, Tuple, Union

import grpc
import grpc.aio

from agentd import _common as c
from agentd._common import (
    AgentdError,
    Event,
    Exit,
    Gap,
    Output,
    PythonRun,
    Result,
    SearchResult,
)
from agentd.v1 import (
    files_pb2,
    files_pb2_grpc,
    process_pb2,
    process_pb2_grpc,
    python_pb2,
    python_pb2_grpc,
    snapshot_pb2,
    snapshot_pb2_grpc,
    system_pb2,
    system_pb2_grpc,
)

__all__ = [
    "AgentdError",
    "Event",
    "Exit",
    "Files",
    "Gap",
    "Hub",
    "Output",
    "Process",
    "PythonRun",
    "Result",
    "SearchResult",
    "Snapshots",
    "Target",
    "connect",
]

CHUNK = 32 << 10


class Hub:
    """A connection to an agenthub, for asyncio (see :class:`agentd.Hub`).
    Make it inside a running event loop; close it with ``await hub.close()``
    or ``async with``."""

    def __init__(
        self,
        url: str,
        token: Optional[str] = None,
        *,
        root_certificates: Optional[bytes] = None,
        reattach_timeout: c.Seconds = 60.0,
    ) -> None:
        addr = c.parse_hub_url(url)
        self.url = url
        self._token = c.resolve_token(token)
        self._reattach = c.seconds(reattach_timeout)
        if addr.tls:
            creds = grpc.ssl_channel_credentials(root_certificates=root_certificates)
            self._channel = grpc.aio.secure_channel(addr.target, creds, options=c.CHANNEL_OPTIONS)
        else:
            self._channel = grpc.aio.insecure_channel(addr.target, options=c.CHANNEL_OPTIONS)

    def machine(self, machine_id: str) -> Target:
        """The paired machine (``m-…``) or sandbox (``sb-…``) with this id."""
        if not machine_id:
            raise ValueError("machine needs an id (m-… or sb-…; see 'agentctl machines')")
        return Target(self._channel, c.route_metadata(self._token, machine=machine_id), self._reattach)

    def sandbox(self, env: str = "", conversation: str = "") -> Target:
        """The sandbox of environment ``env`` (default: the org's default) for
        ``conversation``, created by the hub on the first call."""
        return Target(
            self._channel, c.route_metadata(self._token, env=env, conversation=conversation), self._reattach
        )

    async def close(self) -> None:
        """Closes the connection."""
        await self._channel.close()

    async def __aenter__(self) -> Hub:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


def connect(addr: str, token: str = "", *, reattach_timeout: c.Seconds = 60.0) -> Target:
    """A daemon reached directly (``unix:///path`` or ``tcp://host:port``)."""
    channel = grpc.aio.insecure_channel(c.parse_daemon_addr(addr), options=c.CHANNEL_OPTIONS)
    return Target(channel, c.route_metadata(token), c.seconds(reattach_timeout))


async def _call(aw: Any) -> Any:
    """Awaits a unary call, turning its error into an AgentdError."""
    try:
        return await aw
    except grpc.RpcError as e:
        raise c.from_rpc(e) from None


class Target:
    """A machine or sandbox, for asyncio (see :class:`agentd.Target`)."""

    def __init__(self, channel: grpc.aio.Channel, metadata: c.Metadata, reattach_timeout: float) -> None:
        self._md = metadata
        self._reattach = reattach_timeout
        self._procs = process_pb2_grpc.ProcessServiceStub(channel)  # type: ignore[no-untyped-call]
        self._system = system_pb2_grpc.SystemServiceStub(channel)  # type: ignore[no-untyped-call]
        self._python = python_pb2_grpc.PythonServiceStub(channel)  # type: ignore[no-untyped-call]
        #: File operations.
        self.files = Files(files_pb2_grpc.FileServiceStub(channel), metadata)  # type: ignore[no-untyped-call]
        #: Snapshots.
        self.snapshot = Snapshots(snapshot_pb2_grpc.SnapshotServiceStub(channel), metadata)  # type: ignore[no-untyped-call]

    async def exec(
        self,
        argv: Sequence[str],
        *,
        timeout: Optional[c.Seconds] = None,
        cwd: str = "",
        env: Optional[Mapping[str, str]] = None,
        stdin: Union[bytes, str, None] = None,
        tag: str = "",
        grace: Optional[c.Seconds] = None,
    ) -> Process:
        """Starts a program; returns once it started. ``async for`` the result
        for its output events and, last, its :class:`Exit` (124 on timeout)."""
        req = c.start_request(_argv(argv), timeout=timeout, cwd=cwd, env=env, stdin=stdin, tag=tag, grace=grace)
        return await Process.open(self, self._procs.Start(req, metadata=self._md))

    async def sh(
        self,
        command: str,
        *,
        timeout: Optional[c.Seconds] = None,
        cwd: str = "",
        env: Optional[Mapping[str, str]] = None,
        stdin: Union[bytes, str, None] = None,
        tag: str = "",
        grace: Optional[c.Seconds] = None,
    ) -> Process:
        """As :meth:`exec`, for a command line run by the target's shell."""
        req = c.start_request(None, command, timeout=timeout, cwd=cwd, env=env, stdin=stdin, tag=tag, grace=grace)
        return await Process.open(self, self._procs.Start(req, metadata=self._md))

    async def attach(self, process_id: str, from_offset: int = 0) -> Process:
        """Follows a process by id from ``from_offset`` to its exit."""
        if from_offset < 0:
            raise ValueError("from_offset must not be negative")
        req = process_pb2.AttachRequest(id=process_id, from_offset=from_offset)
        return await Process.open(self, self._procs.Attach(req, metadata=self._md))

    async def signal(self, process_id: str, signal: str = "TERM", *, grace: Optional[c.Seconds] = None) -> None:
        """Sends a signal to the process's whole group."""
        req = process_pb2.SignalRequest(id=process_id, signal=signal)
        c.set_duration(req, "grace", grace)
        await _call(self._procs.Signal(req, metadata=self._md))

    async def kill(self, process_id: str, signal: str = "TERM") -> None:
        """Stops a process: TERM to its group, KILL after the grace period."""
        await self.signal(process_id, signal)

    async def ps(self) -> List[process_pb2.ProcessInfo]:
        """Running and recently finished processes, oldest first."""
        resp: process_pb2.ProcessServiceListResponse = await _call(self._procs.List(process_pb2.ProcessServiceListRequest(), metadata=self._md))
        return list(resp.processes)

    async def wait(self, process_id: str, timeout: Optional[c.Seconds] = None) -> Exit:
        """Waits until the process exits and returns its exit."""
        t = c.seconds(timeout) or None
        resp: process_pb2.WaitResponse = await _call(self._procs.Wait(process_pb2.WaitRequest(id=process_id), metadata=self._md, timeout=t))
        return c.exit_from(resp.process.exited)

    async def python(
        self,
        code: str,
        *,
        session: str = "",
        timeout: Optional[c.Seconds] = None,
        cwd: str = "",
        env: Optional[Mapping[str, str]] = None,
    ) -> PythonRun:
        """Runs Python code (see :meth:`agentd.Target.python`)."""
        req = python_pb2.RunRequest(code=code, session=session, cwd=cwd)
        if env:
            for k, v in env.items():
                req.env[k] = v
        c.set_duration(req, "timeout", timeout)
        run = PythonRun()
        try:
            async for resp in self._python.Run(req, metadata=self._md):
                run.add(resp)
        except grpc.RpcError as e:
            raise c.from_rpc(e) from None
        return run

    async def python_sessions(self) -> List[python_pb2.PythonSession]:
        """The target's Python sessions."""
        resp = await _call(self._python.ListSessions(python_pb2.ListSessionsRequest(), metadata=self._md))
        return list(resp.sessions)

    async def python_reset(self, session: str) -> None:
        """Restarts a session's interpreter (its globals are gone)."""
        await _call(self._python.ResetSession(python_pb2.ResetSessionRequest(session=session), metadata=self._md))

    async def python_close(self, session: str) -> None:
        """Ends a session."""
        await _call(self._python.CloseSession(python_pb2.CloseSessionRequest(session=session), metadata=self._md))

    async def info(self) -> system_pb2.InfoResponse:
        """Version, mode (machine or sandbox), OS, user, workspace, resources."""
        return await _call(self._system.Info(system_pb2.InfoRequest(), metadata=self._md))

    async def inventory(self) -> system_pb2.InventoryResponse:
        """Command-line tools on PATH and Python packages."""
        return await _call(self._system.Inventory(system_pb2.InventoryRequest(), metadata=self._md))

    async def stats(self) -> system_pb2.StatsResponse:
        """What the commands the daemon started use now (CPU nanoseconds so far, memory, processes) and the host's load."""
        return await _call(self._system.Stats(system_pb2.StatsRequest(), metadata=self._md))


class Process:
    """A running or finished command, for asyncio: ``async for`` its events.
    Reattaches by itself when the connection drops."""

    def __init__(self, target: Target, call: grpc.aio.UnaryStreamCall, started: process_pb2.Started) -> None:
        self._target = target
        self._call = call
        self._tracker = c.Tracker()
        #: The daemon's id of the process.
        self.id: str = started.id
        #: The OS process id of its leader.
        self.pid: int = started.pid
        #: The exit, once the iteration reached it.
        self.exit: Optional[Exit] = None
        #: How many times the stream was reattached after a dropped connection.
        self.reattached = 0
        self._events = self._follow()

    @classmethod
    async def open(cls, target: Target, call: grpc.aio.UnaryStreamCall) -> Process:
        """Reads the start event of call."""
        try:
            first = await call.read()
        except grpc.RpcError as e:
            raise c.from_rpc(e) from None
        if first is grpc.aio.EOF or first.event.WhichOneof("event") != "started":
            raise AgentdError(grpc.StatusCode.UNKNOWN, "the daemon did not report the process's start first")
        return cls(target, call, first.event.started)

    def __aiter__(self) -> AsyncIterator[Event]:
        return self._events

    async def _follow(self) -> AsyncIterator[Event]:
        lost_since: Optional[float] = None
        try:
            while True:
                try:
                    while True:
                        resp = await self._call.read()
                        if resp is grpc.aio.EOF:
                            raise AgentdError(
                                grpc.StatusCode.UNKNOWN,
                                f"the stream of {self.id} ended before the process exited; attach({self.id!r}) follows it",
                            )
                        lost_since = None
                        ev = self._tracker.event(resp.event)
                        if ev is None:
                            continue
                        if isinstance(ev, Exit):
                            self.exit = ev
                            yield ev
                            return
                        yield ev
                except grpc.RpcError as e:
                    if not c.connection_lost(e):
                        raise c.from_rpc(e) from None
                    now = time.monotonic()
                    if lost_since is None:
                        lost_since = now
                    if now - lost_since > self._target._reattach:
                        err = c.from_rpc(e)
                        raise c.error(
                            err.code,
                            f"gave up reattaching to {self.id} after {self._target._reattach:g}s: {err.message}; "
                            f"it may still be running: attach({self.id!r}) follows it",
                        ) from None
                    await asyncio.sleep(0.5)
                    req = self._tracker.attach_request(self.id)
                    self._call = self._target._procs.Attach(req, metadata=self._target._md)
                    self.reattached += 1
        finally:
            self._call.cancel()

    async def wait(self) -> Result:
        """Reads the rest of the output and returns the :class:`Result`."""
        out: List[bytes] = []
        err: List[bytes] = []
        async for ev in self:
            if isinstance(ev, Output):
                (err if ev.stream == "stderr" else out).append(ev.data)
        if self.exit is None:
            raise AgentdError(grpc.StatusCode.UNKNOWN, f"{self.id}: no exit received")
        return Result(self.exit, b"".join(out), b"".join(err))

    async def signal(self, signal: str = "TERM") -> None:
        """Sends a signal to the process's group."""
        await self._target.signal(self.id, signal)

    async def kill(self, signal: str = "TERM") -> None:
        """Stops the process."""
        await self._target.kill(self.id, signal)


class Files:
    """File operations, for asyncio (see :class:`agentd.Files`)."""

    def __init__(self, stub: files_pb2_grpc.FileServiceStub, metadata: c.Metadata) -> None:
        self._s = stub
        self._md = metadata

    async def read(self, path: str, *, offset: int = 0, limit: int = 0) -> bytes:
        """The file's bytes from ``offset``, at most ``limit`` (0: to the end)."""
        parts: List[bytes] = []
        try:
            async for r in self._s.Read(files_pb2.ReadRequest(path=path, offset=offset, limit=limit), metadata=self._md):
                parts.append(r.data)
        except grpc.RpcError as e:
            raise c.from_rpc(e) from None
        return b"".join(parts)

    async def read_text(self, path: str, encoding: str = "utf-8") -> str:
        """The whole file as text."""
        return (await self.read(path)).decode(encoding)

    async def lines(self, path: str, from_line: int = 1, count: int = 0) -> files_pb2.ReadLinesResponse:
        """A range of lines with the total line count."""
        req = files_pb2.ReadLinesRequest(path=path, from_line=from_line, count=count)
        return await _call(self._s.ReadLines(req, metadata=self._md))

    async def write(
        self,
        path: str,
        data: Union[bytes, str],
        *,
        mode: int = 0,
        create_parents: bool = True,
        append: bool = False,
        expected_sha256: str = "",
    ) -> files_pb2.WriteResponse:
        """Writes a file atomically (see :meth:`agentd.Files.write`)."""
        header = files_pb2.WriteHeader(
            path=path, mode=mode, create_parents=create_parents, append=append, expected_sha256=expected_sha256
        )
        b = data.encode("utf-8") if isinstance(data, str) else bytes(data)
        reqs = [files_pb2.WriteRequest(header=header)]
        reqs += [files_pb2.WriteRequest(data=b[i : i + CHUNK]) for i in range(0, len(b), CHUNK)]
        return await _call(self._s.Write(iter(reqs), metadata=self._md))

    async def edit(
        self,
        path: str,
        old: str = "",
        new: str = "",
        *,
        replace_all: bool = False,
        edits: Sequence[Tuple[str, str]] = (),
        expected_sha256: str = "",
        dry_run: bool = False,
    ) -> files_pb2.EditResponse:
        """Exact string replacements, all or none (see :meth:`agentd.Files.edit`)."""
        reps = [files_pb2.Replacement(old_string=o, new_string=n, replace_all=replace_all) for o, n in edits]
        if old or not reps:
            reps.insert(0, files_pb2.Replacement(old_string=old, new_string=new, replace_all=replace_all))
        req = files_pb2.EditRequest(path=path, edits=reps, expected_sha256=expected_sha256, dry_run=dry_run)
        return await _call(self._s.Edit(req, metadata=self._md))

    async def list(
        self, path: str = ".", *, depth: int = 1, hidden: bool = False, max_entries: int = 0
    ) -> List[files_pb2.FileInfo]:
        """Entries of a directory."""
        req = files_pb2.FileServiceListRequest(path=path, depth=depth, hidden=hidden, max_entries=max_entries)
        return list((await _call(self._s.List(req, metadata=self._md))).entries)

    async def stat(self, path: str) -> files_pb2.FileInfo:
        """A file's type, size, mode, modification time, owner."""
        return (await _call(self._s.Stat(files_pb2.StatRequest(path=path), metadata=self._md))).info

    async def exists(self, path: str) -> bool:
        """Whether path exists."""
        try:
            await self.stat(path)
        except c.NotFound:
            return False
        return True

    async def mkdir(self, path: str, *, parents: bool = True, mode: int = 0) -> None:
        """Makes a directory (and its parents)."""
        await _call(self._s.MakeDir(files_pb2.MakeDirRequest(path=path, parents=parents, mode=mode), metadata=self._md))

    async def move(self, source: str, destination: str, *, overwrite: bool = False) -> None:
        """Renames or moves a file or directory."""
        req = files_pb2.MoveRequest(source=source, destination=destination, overwrite=overwrite)
        await _call(self._s.Move(req, metadata=self._md))

    async def remove(self, path: str, *, recursive: bool = False) -> None:
        """Removes a file or directory."""
        await _call(self._s.Remove(files_pb2.RemoveRequest(path=path, recursive=recursive), metadata=self._md))

    async def glob(self, pattern: str, path: str = ".", *, max_results: int = 0, hidden: bool = False) -> List[str]:
        """Paths matching a ``**`` pattern."""
        req = files_pb2.GlobRequest(pattern=pattern, path=path, max_results=max_results, hidden=hidden)
        return list((await _call(self._s.Glob(req, metadata=self._md))).paths)

    async def search(self, pattern: str, path: str = ".", *, fixed_string: bool = False, ignore_case: bool = False) -> SearchResult:
        """Searches file contents (see :meth:`agentd.Files.search`)."""
        req = files_pb2.SearchRequest(pattern=pattern, path=path, fixed_string=fixed_string, ignore_case=ignore_case)
        res = SearchResult()
        try:
            async for r in self._s.Search(req, metadata=self._md):
                res.add(r)
        except grpc.RpcError as e:
            raise c.from_rpc(e) from None
        return res


class Snapshots:
    """Snapshots, for asyncio (see :class:`agentd.Snapshots`)."""

    def __init__(self, stub: snapshot_pb2_grpc.SnapshotServiceStub, metadata: c.Metadata) -> None:
        self._s = stub
        self._md = metadata

    async def create(self, root: str = ".", *, label: str = "", excludes: Sequence[str] = ()) -> snapshot_pb2.Snapshot:
        """Snapshots ``root``."""
        req = snapshot_pb2.CreateRequest(root=root, label=label, excludes=excludes)
        try:
            async for r in self._s.Create(req, metadata=self._md):
                if r.WhichOneof("event") == "snapshot":
                    return r.snapshot
        except grpc.RpcError as e:
            raise c.from_rpc(e) from None
        raise AgentdError(grpc.StatusCode.UNKNOWN, "snapshot create ended without the snapshot")

    async def list(self) -> List[snapshot_pb2.Snapshot]:
        """The daemon's snapshots."""
        return list((await _call(self._s.List(snapshot_pb2.SnapshotServiceListRequest(), metadata=self._md))).snapshots)

    async def get(self, snapshot_id: str) -> snapshot_pb2.GetResponse:
        """A snapshot and its manifest."""
        return await _call(self._s.Get(snapshot_pb2.GetRequest(id=snapshot_id), metadata=self._md))

    async def export(self, snapshot_id: str) -> bytes:
        """The snapshot as a tar archive."""
        parts: List[bytes] = []
        try:
            async for r in self._s.Export(snapshot_pb2.ExportRequest(id=snapshot_id), metadata=self._md):
                parts.append(r.data)
        except grpc.RpcError as e:
            raise c.from_rpc(e) from None
        return b"".join(parts)

    async def diff(self, from_id: str, to_id: str = "") -> List[snapshot_pb2.DiffEntry]:
        """Paths that differ (``to_id`` empty: the live tree)."""
        req = snapshot_pb2.DiffRequest(from_id=from_id, to_id=to_id)
        return list((await _call(self._s.Diff(req, metadata=self._md))).changes)

    async def restore(self, snapshot_id: str, target: str = "", *, delete_extra: bool = False) -> snapshot_pb2.RestoreSummary:
        """Writes a snapshot back."""
        req = snapshot_pb2.RestoreRequest(id=snapshot_id, target=target, delete_extra=delete_extra)
        try:
            async for r in self._s.Restore(req, metadata=self._md):
                if r.WhichOneof("event") == "summary":
                    return r.summary
        except grpc.RpcError as e:
            raise c.from_rpc(e) from None
        raise AgentdError(grpc.StatusCode.UNKNOWN, "snapshot restore ended without its summary")

    async def delete(self, snapshot_id: str) -> int:
        """Deletes a snapshot; returns the bytes freed."""
        return (await _call(self._s.Delete(snapshot_pb2.DeleteRequest(id=snapshot_id), metadata=self._md))).freed_bytes



def _argv(argv: Sequence[str]) -> List[str]:
    if isinstance(argv, (str, bytes)):
        raise TypeError("argv is a list of strings, e.g. ['ls', '-la']; for a command line use sh()")
    return list(argv)
