"""The blocking client: :class:`Hub`, :class:`Target` and their services."""

from __future__ import annotations

import time
from typing import Callable, Generator, Iterable, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

import grpc

from agentd import _common as c
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

CHUNK = 32 << 10


def _call(fn: Callable[[], c.T]) -> c.T:
    try:
        return fn()
    except grpc.RpcError as e:
        raise c.from_rpc(e) from None


class Hub:
    """A connection to an agenthub.

    ``url`` is ``http://host:port`` (plaintext, loopback) or ``https://host``
    (TLS, with the system's roots unless ``root_certificates`` is given);
    ``token`` is an API token (default ``$AGENTD_TOKEN``). One connection
    serves every target made from it; close it with :meth:`close` or a
    ``with`` block.

    >>> hub = Hub("http://127.0.0.1:8443", token="…")
    >>> box = hub.sandbox(env="builtin", conversation="c-42")
    >>> for ev in box.exec(["echo", "hi"]):
    ...     print(ev.text, end="")
    """

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
            self._channel = grpc.secure_channel(addr.target, creds, options=c.CHANNEL_OPTIONS)
        else:
            self._channel = grpc.insecure_channel(addr.target, options=c.CHANNEL_OPTIONS)

    def machine(self, machine_id: str) -> Target:
        """The paired machine (``m-…``) or sandbox (``sb-…``) with this id."""
        if not machine_id:
            raise ValueError("machine needs an id (m-… or sb-…; see 'agentctl machines')")
        return Target(self._channel, c.route_metadata(self._token, machine=machine_id), self._reattach)

    def sandbox(self, env: str = "", conversation: str = "") -> Target:
        """The sandbox of environment ``env`` (default: the org's default
        environment) for ``conversation``: the hub creates it on the first
        call and routes every later call with the same pair to it."""
        return Target(
            self._channel, c.route_metadata(self._token, env=env, conversation=conversation), self._reattach
        )

    def close(self) -> None:
        """Closes the connection; targets made from this hub stop working."""
        self._channel.close()

    def __enter__(self) -> Hub:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def connect(addr: str, token: str = "", *, reattach_timeout: c.Seconds = 60.0) -> Target:
    """A daemon reached directly, as ``agentctl --addr``: ``unix:///path/agentd.sock``
    or ``tcp://host:port`` (``token``: its ``--token-file``'s)."""
    channel = grpc.insecure_channel(c.parse_daemon_addr(addr), options=c.CHANNEL_OPTIONS)
    return Target(channel, c.route_metadata(token), c.seconds(reattach_timeout))


class Target:
    """A machine or sandbox: run commands, work on files, run Python, take
    snapshots. Made by :meth:`Hub.machine`, :meth:`Hub.sandbox` or
    :func:`connect`."""

    def __init__(self, channel: grpc.Channel, metadata: c.Metadata, reattach_timeout: float) -> None:
        self._channel = channel
        self._md = metadata
        self._reattach = reattach_timeout
        self._procs = process_pb2_grpc.ProcessServiceStub(channel)  # type: ignore[no-untyped-call]
        self._system = system_pb2_grpc.SystemServiceStub(channel)  # type: ignore[no-untyped-call]
        #: File operations (:class:`Files`).
        self.files = Files(files_pb2_grpc.FileServiceStub(channel), metadata)  # type: ignore[no-untyped-call]
        #: Snapshots of directory trees (:class:`Snapshots`).
        self.snapshot = Snapshots(snapshot_pb2_grpc.SnapshotServiceStub(channel), metadata)  # type: ignore[no-untyped-call]
        self._python = python_pb2_grpc.PythonServiceStub(channel)  # type: ignore[no-untyped-call]

    # Processes.

    def exec(
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
        """Starts a program (no shell) and returns it once it has started.

        Iterate the result for its output events (:class:`Output`, in order)
        and, last, its :class:`Exit`; or call :meth:`Process.wait`. ``timeout``
        (seconds or a timedelta) kills the whole process group; the exit code
        is then 124. The command does not depend on this call: it keeps running
        if the connection drops (the stream reattaches by itself) or if you stop
        iterating (:meth:`Process.kill` stops it)."""
        req = c.start_request(_argv(argv), timeout=timeout, cwd=cwd, env=env, stdin=stdin, tag=tag, grace=grace)
        return self._start(req)

    def sh(
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
        """As :meth:`exec`, for a command line run by the target's shell
        (``$SHELL -c``), so pipes, globs and redirections work."""
        req = c.start_request(None, command, timeout=timeout, cwd=cwd, env=env, stdin=stdin, tag=tag, grace=grace)
        return self._start(req)

    def _start(self, req: process_pb2.StartRequest) -> Process:
        return Process(self, lambda: self._procs.Start(req, metadata=self._md))

    def attach(self, process_id: str, from_offset: int = 0) -> Process:
        """Follows a process by id: replays its retained output from
        ``from_offset`` (stdout and stderr) and continues live to its exit."""
        if from_offset < 0:
            raise ValueError("from_offset must not be negative")
        req = process_pb2.AttachRequest(id=process_id, from_offset=from_offset)
        return Process(self, lambda: self._procs.Attach(req, metadata=self._md))

    def signal(self, process_id: str, signal: str = "TERM", *, grace: Optional[c.Seconds] = None) -> None:
        """Sends a signal (``"TERM"``, ``"KILL"``, ``"INT"``, ``"HUP"``, … or a
        number) to the process's whole group. TERM is followed by KILL after
        ``grace`` (default: the process's, 5 s) if anything is still alive."""
        req = process_pb2.SignalRequest(id=process_id, signal=signal)
        c.set_duration(req, "grace", grace)
        _call(lambda: self._procs.Signal(req, metadata=self._md))

    def kill(self, process_id: str, signal: str = "TERM") -> None:
        """Stops a process as ``agentctl kill``: TERM to its group, then KILL
        after the grace period (``signal="KILL"`` at once)."""
        self.signal(process_id, signal)

    def ps(self) -> List[process_pb2.ProcessInfo]:
        """Running and recently finished processes, oldest first."""
        resp = _call(lambda: self._procs.List(process_pb2.ProcessServiceListRequest(), metadata=self._md))
        return list(resp.processes)

    def wait(self, process_id: str, timeout: Optional[c.Seconds] = None) -> Exit:
        """Blocks until the process exits (or ``timeout`` passes:
        :class:`DeadlineExceeded`) and returns its exit."""
        t = c.seconds(timeout) or None
        resp = _call(lambda: self._procs.Wait(process_pb2.WaitRequest(id=process_id), metadata=self._md, timeout=t))
        return c.exit_from(resp.process.exited)

    # Python.

    def python(
        self,
        code: str,
        *,
        session: str = "",
        timeout: Optional[c.Seconds] = None,
        cwd: str = "",
        env: Optional[Mapping[str, str]] = None,
    ) -> PythonRun:
        """Runs Python code with the target's python3. With ``session`` a
        persistent interpreter keeps its globals between runs (like a notebook
        kernel). Returns the run's output, the repr of a trailing expression
        and the exception it raised, if any (it is not raised here)."""
        req = python_pb2.RunRequest(code=code, session=session, cwd=cwd)
        if env:
            for k, v in env.items():
                req.env[k] = v
        c.set_duration(req, "timeout", timeout)
        run = PythonRun()
        try:
            for resp in self._python.Run(req, metadata=self._md):
                run.add(resp)
        except grpc.RpcError as e:
            raise c.from_rpc(e) from None
        return run

    def python_sessions(self) -> List[python_pb2.PythonSession]:
        """The target's Python sessions."""
        resp = _call(lambda: self._python.ListSessions(python_pb2.ListSessionsRequest(), metadata=self._md))
        return list(resp.sessions)

    def python_reset(self, session: str) -> None:
        """Restarts a session's interpreter (its globals are gone)."""
        _call(lambda: self._python.ResetSession(python_pb2.ResetSessionRequest(session=session), metadata=self._md))

    def python_close(self, session: str) -> None:
        """Ends a session."""
        _call(lambda: self._python.CloseSession(python_pb2.CloseSessionRequest(session=session), metadata=self._md))

    # System.

    def info(self) -> system_pb2.InfoResponse:
        """Version, mode (machine or sandbox), OS, user, workspace, resources."""
        return _call(lambda: self._system.Info(system_pb2.InfoRequest(), metadata=self._md))

    def inventory(self) -> system_pb2.InventoryResponse:
        """Command-line tools on PATH and Python packages."""
        return _call(lambda: self._system.Inventory(system_pb2.InventoryRequest(), metadata=self._md))

    def stats(self) -> system_pb2.StatsResponse:
        """What the commands the daemon started use now (CPU nanoseconds so far, memory, processes) and the host's load."""
        return _call(lambda: self._system.Stats(system_pb2.StatsRequest(), metadata=self._md))


# Re-exported for the signatures above.
Exit = c.Exit
PythonRun = c.PythonRun


class Process:
    """A running (or finished) command. Iterate it for :class:`Output` (and,
    rarely, :class:`Gap`) events in order, then one :class:`Exit`. The
    stream survives a dropped connection: it reattaches from the last
    offset delivered, for up to the hub's ``reattach_timeout``."""

    def __init__(self, target: Target, open_stream: Callable[[], Iterator[process_pb2.StartResponse]]) -> None:
        self._target = target
        self._tracker = c.Tracker()
        #: The exit, once the iteration reached it.
        self.exit: Optional[c.Exit] = None
        self._stream: Optional[grpc.Call] = None
        try:
            stream = open_stream()
            first = next(stream)
        except grpc.RpcError as e:
            raise c.from_rpc(e) from None
        except StopIteration:
            raise c.AgentdError(grpc.StatusCode.UNKNOWN, "the stream ended before the process started") from None
        if first.event.WhichOneof("event") != "started":
            raise c.AgentdError(grpc.StatusCode.UNKNOWN, "the daemon did not report the process's start first")
        #: The daemon's id of the process (for attach, signal, kill).
        self.id: str = first.event.started.id
        #: The OS process id of its leader.
        self.pid: int = first.event.started.pid
        #: How many times the stream was reattached after a dropped connection.
        self.reattached = 0
        self._iter: Iterator[process_pb2.StartResponse] = stream
        self._call = stream
        self._events = self._follow()

    def __iter__(self) -> Iterator[c.Event]:
        return self._events

    def _follow(self) -> Generator[c.Event, None, None]:
        stream: Iterator[process_pb2.StartResponse] = self._iter
        lost_since: Optional[float] = None
        try:
            while True:
                try:
                    for resp in stream:
                        lost_since = None
                        ev = self._tracker.event(resp.event)
                        if ev is None:
                            continue
                        if isinstance(ev, c.Exit):
                            self.exit = ev
                            yield ev
                            return
                        yield ev
                    raise c.AgentdError(
                        grpc.StatusCode.UNKNOWN,
                        f"the stream of {self.id} ended before the process exited; attach({self.id!r}) follows it",
                    )
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
                    time.sleep(0.5)
                    req = self._tracker.attach_request(self.id)
                    call = self._target._procs.Attach(req, metadata=self._target._md)
                    self._call = call
                    stream = call
                    self.reattached += 1
        finally:
            cancel = getattr(self._call, "cancel", None)
            if cancel is not None:
                cancel()

    def wait(self) -> c.Result:
        """Reads the rest of the output and returns the :class:`Result`
        (exit and all stdout and stderr read through this object)."""
        out: List[bytes] = []
        err: List[bytes] = []
        for ev in self:
            if isinstance(ev, c.Output):
                (err if ev.stream == "stderr" else out).append(ev.data)
        if self.exit is None:
            raise c.AgentdError(grpc.StatusCode.UNKNOWN, f"{self.id}: no exit received")
        return c.Result(self.exit, b"".join(out), b"".join(err))

    def signal(self, signal: str = "TERM") -> None:
        """Sends a signal to the process's group (see :meth:`Target.signal`)."""
        self._target.signal(self.id, signal)

    def kill(self, signal: str = "TERM") -> None:
        """Stops the process (see :meth:`Target.kill`)."""
        self._target.kill(self.id, signal)

    def close(self) -> None:
        """Stops following (the process keeps running)."""
        self._events.close()


class Files:
    """File operations on a target. Paths are absolute or relative to the
    daemon's workspace (in a sandbox /workspace)."""

    def __init__(self, stub: files_pb2_grpc.FileServiceStub, metadata: c.Metadata) -> None:
        self._s = stub
        self._md = metadata

    def read(self, path: str, *, offset: int = 0, limit: int = 0) -> bytes:
        """The file's bytes from ``offset``, at most ``limit`` (0: to the end)."""
        req = files_pb2.ReadRequest(path=path, offset=offset, limit=limit)

        def run() -> bytes:
            return b"".join(r.data for r in self._s.Read(req, metadata=self._md))

        return _call(run)

    def read_text(self, path: str, encoding: str = "utf-8") -> str:
        """The whole file as text."""
        return self.read(path).decode(encoding)

    def lines(self, path: str, from_line: int = 1, count: int = 0) -> files_pb2.ReadLinesResponse:
        """A range of lines (1-based) with the total line count; long lines
        are cut with a marker; binary files are refused."""
        req = files_pb2.ReadLinesRequest(path=path, from_line=from_line, count=count)
        return _call(lambda: self._s.ReadLines(req, metadata=self._md))

    def write(
        self,
        path: str,
        data: Union[bytes, str, Iterable[bytes]],
        *,
        mode: int = 0,
        create_parents: bool = True,
        append: bool = False,
        expected_sha256: str = "",
    ) -> files_pb2.WriteResponse:
        """Writes a file atomically (str is written as UTF-8; an iterable of
        bytes is streamed). ``expected_sha256``: refuse (FailedPrecondition,
        nothing changed) unless the file's content still has this hash."""
        header = files_pb2.WriteHeader(
            path=path, mode=mode, create_parents=create_parents, append=append, expected_sha256=expected_sha256
        )

        def requests() -> Iterator[files_pb2.WriteRequest]:
            yield files_pb2.WriteRequest(header=header)
            for chunk in _chunks(data):
                yield files_pb2.WriteRequest(data=chunk)

        return _call(lambda: self._s.Write(requests(), metadata=self._md))

    def edit(
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
        """Replaces ``old`` by ``new`` (or each pair of ``edits``), all at
        once or none. Each ``old`` must occur once unless ``replace_all``:
        not found is :class:`NotFound` naming the closest line, ambiguous is
        :class:`FailedPrecondition` with the count and line numbers. Returns
        the count, a unified diff and the new sha256."""
        reps = [files_pb2.Replacement(old_string=o, new_string=n, replace_all=replace_all) for o, n in edits]
        if old or not reps:
            reps.insert(0, files_pb2.Replacement(old_string=old, new_string=new, replace_all=replace_all))
        req = files_pb2.EditRequest(path=path, edits=reps, expected_sha256=expected_sha256, dry_run=dry_run)
        return _call(lambda: self._s.Edit(req, metadata=self._md))

    def list(
        self, path: str = ".", *, depth: int = 1, hidden: bool = False, max_entries: int = 0
    ) -> List[files_pb2.FileInfo]:
        """Entries of a directory (``depth`` levels), in a deterministic order."""
        req = files_pb2.FileServiceListRequest(path=path, depth=depth, hidden=hidden, max_entries=max_entries)
        return list(_call(lambda: self._s.List(req, metadata=self._md)).entries)

    def stat(self, path: str) -> files_pb2.FileInfo:
        """A file's type, size, mode, modification time, owner."""
        return _call(lambda: self._s.Stat(files_pb2.StatRequest(path=path), metadata=self._md)).info

    def exists(self, path: str) -> bool:
        """Whether path exists."""
        try:
            self.stat(path)
        except c.NotFound:
            return False
        return True

    def mkdir(self, path: str, *, parents: bool = True, mode: int = 0) -> None:
        """Makes a directory (and its parents)."""
        req = files_pb2.MakeDirRequest(path=path, parents=parents, mode=mode)
        _call(lambda: self._s.MakeDir(req, metadata=self._md))

    def move(self, source: str, destination: str, *, overwrite: bool = False) -> None:
        """Renames or moves a file or directory."""
        req = files_pb2.MoveRequest(source=source, destination=destination, overwrite=overwrite)
        _call(lambda: self._s.Move(req, metadata=self._md))

    def remove(self, path: str, *, recursive: bool = False) -> None:
        """Removes a file, or a directory (non-empty only with ``recursive``)."""
        _call(lambda: self._s.Remove(files_pb2.RemoveRequest(path=path, recursive=recursive), metadata=self._md))

    def search(
        self,
        pattern: str,
        path: str = ".",
        *,
        fixed_string: bool = False,
        ignore_case: bool = False,
        include: Sequence[str] = (),
        exclude: Sequence[str] = (),
        context_lines: int = 0,
        max_matches: int = 0,
    ) -> c.SearchResult:
        """Searches file contents (RE2, or a fixed string), respecting
        .gitignore and skipping binary files."""
        req = files_pb2.SearchRequest(
            pattern=pattern,
            path=path,
            fixed_string=fixed_string,
            ignore_case=ignore_case,
            include=include,
            exclude=exclude,
            context_lines=context_lines,
            max_matches=max_matches,
        )

        def run() -> c.SearchResult:
            res = c.SearchResult()
            for r in self._s.Search(req, metadata=self._md):
                res.add(r)
            return res

        return _call(run)

    def glob(self, pattern: str, path: str = ".", *, max_results: int = 0, hidden: bool = False) -> List[str]:
        """Paths matching a ``**`` pattern, respecting .gitignore."""
        req = files_pb2.GlobRequest(pattern=pattern, path=path, max_results=max_results, hidden=hidden)
        return list(_call(lambda: self._s.Glob(req, metadata=self._md)).paths)


def _chunks(data: Union[bytes, str, Iterable[bytes]]) -> Iterator[bytes]:
    if isinstance(data, str):
        data = data.encode("utf-8")
    if isinstance(data, (bytes, bytearray, memoryview)):
        b = bytes(data)
        for i in range(0, len(b), CHUNK):
            yield b[i : i + CHUNK]
        return
    for chunk in data:
        yield chunk


class Snapshots:
    """Point-in-time copies of directory trees, kept by the daemon."""

    def __init__(self, stub: snapshot_pb2_grpc.SnapshotServiceStub, metadata: c.Metadata) -> None:
        self._s = stub
        self._md = metadata

    def create(self, root: str = ".", *, label: str = "", excludes: Sequence[str] = ()) -> snapshot_pb2.Snapshot:
        """Snapshots ``root``; returns the snapshot (its ``id`` for the rest)."""
        req = snapshot_pb2.CreateRequest(root=root, label=label, excludes=excludes)

        def run() -> snapshot_pb2.Snapshot:
            for r in self._s.Create(req, metadata=self._md):
                if r.WhichOneof("event") == "snapshot":
                    return r.snapshot
            raise c.AgentdError(grpc.StatusCode.UNKNOWN, "snapshot create ended without the snapshot")

        return _call(run)

    def list(self) -> List[snapshot_pb2.Snapshot]:
        """The daemon's snapshots."""
        return list(_call(lambda: self._s.List(snapshot_pb2.SnapshotServiceListRequest(), metadata=self._md)).snapshots)

    def get(self, snapshot_id: str) -> snapshot_pb2.GetResponse:
        """A snapshot and its manifest."""
        return _call(lambda: self._s.Get(snapshot_pb2.GetRequest(id=snapshot_id), metadata=self._md))

    def diff(self, from_id: str, to_id: str = "") -> List[snapshot_pb2.DiffEntry]:
        """Paths that differ between two snapshots (``to_id`` empty: the live tree)."""
        req = snapshot_pb2.DiffRequest(from_id=from_id, to_id=to_id)
        return list(_call(lambda: self._s.Diff(req, metadata=self._md)).changes)

    def restore(self, snapshot_id: str, target: str = "", *, delete_extra: bool = False) -> snapshot_pb2.RestoreSummary:
        """Writes a snapshot back (into its root, or ``target``); with
        ``delete_extra`` removes what the snapshot does not have."""
        req = snapshot_pb2.RestoreRequest(id=snapshot_id, target=target, delete_extra=delete_extra)

        def run() -> snapshot_pb2.RestoreSummary:
            for r in self._s.Restore(req, metadata=self._md):
                if r.WhichOneof("event") == "summary":
                    return r.summary
            raise c.AgentdError(grpc.StatusCode.UNKNOWN, "snapshot restore ended without its summary")

        return _call(run)

    def export(self, snapshot_id: str) -> bytes:
        """The snapshot as a tar archive."""
        req = snapshot_pb2.ExportRequest(id=snapshot_id)
        return _call(lambda: b"".join(r.data for r in self._s.Export(req, metadata=self._md)))

    def delete(self, snapshot_id: str) -> int:
        """Deletes a snapshot; returns the bytes freed."""
        return _call(lambda: self._s.Delete(snapshot_pb2.DeleteRequest(id=snapshot_id), metadata=self._md)).freed_bytes


def _argv(argv: Sequence[str]) -> List[str]:
    if isinstance(argv, (str, bytes)):
        raise TypeError("argv is a list of strings, e.g. ['ls', '-la']; for a command line use sh()")
    return list(argv)
