"""What the blocking and the asyncio clients share: addresses, metadata,
events, errors and the bookkeeping that makes a reattach seamless."""

from __future__ import annotations

import dataclasses
import datetime
import os
import urllib.parse
from typing import Dict, List, Mapping, Optional, Sequence, Tuple, Type, TypeVar, Union

import grpc

from agentd.v1 import files_pb2, process_pb2, python_pb2

T = TypeVar("T")

# gRPC metadata keys (internal/wire/metadata.go).
MD_MACHINE = "agentd-machine"
MD_ENVIRONMENT = "agentd-environment"
MD_CONVERSATION = "agentd-conversation"
MD_AUTHORIZATION = "authorization"

#: Exit code reported for a command killed by its timeout, as agentctl does
#: (the daemon never invents it: its exit record says ``timed_out``).
EXIT_TIMEOUT = 124

Metadata = Tuple[Tuple[str, str], ...]
Seconds = Union[float, int, datetime.timedelta]

# Channel options: reconnect quickly after a hub restart (gRPC's default
# backoff grows to two minutes) and allow large messages.
CHANNEL_OPTIONS: List[Tuple[str, int]] = [
    ("grpc.initial_reconnect_backoff_ms", 250),
    ("grpc.min_reconnect_backoff_ms", 250),
    ("grpc.max_reconnect_backoff_ms", 2000),
    ("grpc.max_receive_message_length", 64 << 20),
    ("grpc.max_send_message_length", 64 << 20),
]


class AgentdError(Exception):
    """A call failed. ``code`` is the gRPC status code, ``message`` the
    server's message (written for a person or a language model to act on).
    Subclasses name the common codes: :class:`NotFound`,
    :class:`FailedPrecondition`, :class:`Unauthenticated`, …"""

    #: The status code this class stands for (the base class: any).
    status: Optional[grpc.StatusCode] = None

    def __init__(self, code: grpc.StatusCode, message: str) -> None:
        super().__init__(f"{code.name}: {message}")
        self.code = code
        self.message = message


class InvalidArgument(AgentdError):
    """INVALID_ARGUMENT: the request itself is wrong (a bad path, argv, …)."""

    status = grpc.StatusCode.INVALID_ARGUMENT


class NotFound(AgentdError):
    """NOT_FOUND: no such file, process, snapshot, machine (or one of another org)."""

    status = grpc.StatusCode.NOT_FOUND


class AlreadyExists(AgentdError):
    """ALREADY_EXISTS: the target of a create or move is there already."""

    status = grpc.StatusCode.ALREADY_EXISTS


class PermissionDenied(AgentdError):
    """PERMISSION_DENIED: the token's role or the file's mode forbids it."""

    status = grpc.StatusCode.PERMISSION_DENIED


class Unauthenticated(AgentdError):
    """UNAUTHENTICATED: the token is missing, wrong or revoked."""

    status = grpc.StatusCode.UNAUTHENTICATED


class FailedPrecondition(AgentdError):
    """FAILED_PRECONDITION: e.g. an ambiguous edit, a sha256 that no longer
    matches, an environment that is not ready."""

    status = grpc.StatusCode.FAILED_PRECONDITION


class Unavailable(AgentdError):
    """UNAVAILABLE: the hub or the machine cannot be reached (offline machine,
    hub down). Streams of running commands reattach by themselves first."""

    status = grpc.StatusCode.UNAVAILABLE


class DeadlineExceeded(AgentdError):
    """DEADLINE_EXCEEDED: the call's own deadline passed."""

    status = grpc.StatusCode.DEADLINE_EXCEEDED


class ResourceExhausted(AgentdError):
    """RESOURCE_EXHAUSTED: a limit (quota, size, sandboxes per org) was reached."""

    status = grpc.StatusCode.RESOURCE_EXHAUSTED


class Cancelled(AgentdError):
    """CANCELLED: the call was cancelled."""

    status = grpc.StatusCode.CANCELLED


_BY_CODE: Dict[grpc.StatusCode, Type[AgentdError]] = {
    c.status: c
    for c in (
        InvalidArgument,
        NotFound,
        AlreadyExists,
        PermissionDenied,
        Unauthenticated,
        FailedPrecondition,
        Unavailable,
        DeadlineExceeded,
        ResourceExhausted,
        Cancelled,
    )
    if c.status is not None
}


def error(code: grpc.StatusCode, message: str) -> AgentdError:
    """The exception for a status: the subclass for code, else AgentdError."""
    return _BY_CODE.get(code, AgentdError)(code, message)


def from_rpc(e: grpc.RpcError) -> AgentdError:
    """Turns a gRPC error (blocking or asyncio) into an :class:`AgentdError`."""
    code = e.code() if hasattr(e, "code") else grpc.StatusCode.UNKNOWN
    details = e.details() if hasattr(e, "details") else str(e)
    if not isinstance(code, grpc.StatusCode):
        code = grpc.StatusCode.UNKNOWN
    return error(code, str(details or ""))


def connection_lost(e: grpc.RpcError) -> bool:
    """Whether e ended a stream because the connection broke (the command
    goes on): UNAVAILABLE, or a stream reset with INTERNAL_ERROR (how a
    reverse proxy ends a call whose upstream died). As agentctl decides."""
    code = e.code() if hasattr(e, "code") else None
    if code == grpc.StatusCode.UNAVAILABLE:
        return True
    if code == grpc.StatusCode.INTERNAL:
        details = str(e.details() if hasattr(e, "details") else "")
        return "RST_STREAM" in details
    return False


@dataclasses.dataclass(frozen=True)
class Address:
    """Where to dial: host:port, and whether with TLS."""

    target: str
    tls: bool


def parse_hub_url(url: str) -> Address:
    """Parses a hub URL, ``http://host:port`` (loopback, plaintext) or
    ``https://host[:port]`` (TLS)."""
    u = urllib.parse.urlsplit(url)
    if u.scheme not in ("http", "https") or not u.hostname:
        raise ValueError(f"hub URL {url!r}: want http://host:port or https://host")
    port = u.port or (443 if u.scheme == "https" else 80)
    host = u.hostname
    if ":" in host:
        host = f"[{host}]"
    return Address(f"{host}:{port}", u.scheme == "https")


def parse_daemon_addr(addr: str) -> str:
    """Turns agentctl's ``--addr`` forms (``unix:///path``, ``tcp://host:port``)
    into a gRPC target."""
    if addr.startswith("unix://"):
        path = addr[len("unix://"):]
        if not path:
            raise ValueError(f"address {addr!r}: want unix:///path/agentd.sock")
        return "unix:" + os.path.abspath(path)
    if addr.startswith("tcp://"):
        hostport = addr[len("tcp://"):]
        if not hostport or ":" not in hostport:
            raise ValueError(f"address {addr!r}: want tcp://host:port")
        return hostport
    raise ValueError(f"address {addr!r}: want unix:///path/agentd.sock or tcp://host:port")


def resolve_token(token: Optional[str]) -> str:
    """The token given, else ``$AGENTD_TOKEN``; refuses none."""
    tok = token if token is not None else os.environ.get("AGENTD_TOKEN", "")
    tok = tok.strip()
    if not tok:
        raise ValueError(
            "the hub needs an API token: pass token= or set $AGENTD_TOKEN "
            "(an admin creates one with 'agentctl admin token create')"
        )
    return tok


def route_metadata(
    token: str,
    machine: str = "",
    env: str = "",
    conversation: str = "",
) -> Metadata:
    """The metadata of a call routed through the hub."""
    md: List[Tuple[str, str]] = []
    if token:
        md.append((MD_AUTHORIZATION, "Bearer " + token))
    if machine:
        md.append((MD_MACHINE, machine))
    if env:
        md.append((MD_ENVIRONMENT, env))
    if conversation:
        md.append((MD_CONVERSATION, conversation))
    return tuple(md)


def seconds(v: Optional[Seconds]) -> float:
    """A duration given as seconds or a timedelta, in seconds (None: 0)."""
    if v is None:
        return 0.0
    if isinstance(v, datetime.timedelta):
        return v.total_seconds()
    return float(v)


def set_duration(msg: object, field: str, v: Optional[Seconds]) -> None:
    """Sets a google.protobuf.Duration field of msg from seconds, if above 0."""
    s = seconds(v)
    if s < 0:
        raise ValueError(f"{field} must not be negative (got {s})")
    if s > 0:
        getattr(msg, field).FromTimedelta(datetime.timedelta(seconds=s))


_STREAMS = {
    process_pb2.OUTPUT_STREAM_STDOUT: "stdout",
    process_pb2.OUTPUT_STREAM_STDERR: "stderr",
    process_pb2.OUTPUT_STREAM_PTY: "pty",
}


@dataclasses.dataclass(frozen=True)
class Output:
    """A chunk of a command's output, in order. ``stream`` is ``"stdout"``,
    ``"stderr"`` or ``"pty"``; ``offset`` is the absolute offset of its first
    byte in that stream. After a reattach no byte is repeated or lost."""

    stream: str
    data: bytes
    offset: int

    @property
    def text(self) -> str:
        """The data as text (UTF-8; invalid bytes replaced). A multi-byte
        character may be split across two chunks: decode ``data`` yourself
        with an incremental decoder when that matters."""
        return self.data.decode("utf-8", errors="replace")


@dataclasses.dataclass(frozen=True)
class Gap:
    """Output between two offsets was dropped from the daemon's retention
    (seen only when replaying a very long output, e.g. a late attach)."""

    stream: str
    offset: int
    bytes: int

    @property
    def text(self) -> str:
        """A marker for a person: ``[N bytes of stdout not retained]``."""
        return f"\n[{self.bytes} bytes of {self.stream} not retained]\n"


@dataclasses.dataclass(frozen=True)
class Exit:
    """The last event of a command. ``exit_code`` is what agentctl exits
    with: the command's status, 124 when its timeout killed it, 128+N when
    signal N did. ``raw_exit_code`` is the daemon's (-1 for a signal).
    ``reason`` says why the system ended it, when it did: ``"out of memory
    (limit 512 MiB)"``, ``"pids limit (256) reached"``; empty otherwise."""

    exit_code: int
    raw_exit_code: int
    signal: str
    timed_out: bool
    duration: float
    message: process_pb2.Exited
    reason: str = ""

    @property
    def text(self) -> str:
        """Empty: an exit has no output (see ``exit_code``)."""
        return ""

    @property
    def ok(self) -> bool:
        """True when the command exited 0."""
        return self.exit_code == 0


Event = Union[Output, Gap, Exit]


def exit_from(e: process_pb2.Exited) -> Exit:
    """The :class:`Exit` of an Exited message, with agentctl's exit code."""
    if e.timed_out:
        code = EXIT_TIMEOUT
    elif e.signal_number > 0:
        code = 128 + e.signal_number
    else:
        code = e.exit_code
    return Exit(
        exit_code=code,
        raw_exit_code=e.exit_code,
        signal=e.signal,
        timed_out=e.timed_out,
        duration=e.duration.ToTimedelta().total_seconds(),
        message=e,
        reason=e.reason,
    )


@dataclasses.dataclass(frozen=True)
class Result:
    """A finished command: its exit and all its output."""

    exit: Exit
    stdout: bytes
    stderr: bytes

    @property
    def exit_code(self) -> int:
        """As :attr:`Exit.exit_code` (124 on timeout, 128+N on signal N)."""
        return self.exit.exit_code

    @property
    def text(self) -> str:
        """stdout as text."""
        return self.stdout.decode("utf-8", errors="replace")


class Tracker:
    """Follows the offsets delivered per stream, so a replay after a
    reattach yields each byte once (as agentctl's streamWriter)."""

    def __init__(self) -> None:
        self.next: Dict[int, int] = {}

    def event(self, ev: process_pb2.ProcessEvent) -> Optional[Event]:
        """The event to yield for ev (None: nothing new, or a start)."""
        kind = ev.WhichOneof("event")
        if kind == "output":
            o = ev.output
            data, off = o.data, o.offset
            nxt = self.next.get(o.stream, 0)
            end = off + len(data)
            if end <= nxt:
                return None
            if off < nxt:
                data = data[nxt - off:]
                off = nxt
            self.next[o.stream] = end
            return Output(_STREAMS.get(o.stream, "stdout"), bytes(data), off)
        if kind == "gap":
            g = ev.gap
            if g.offset + g.bytes <= self.next.get(g.stream, 0):
                return None
            self.next[g.stream] = g.offset + g.bytes
            return Gap(_STREAMS.get(g.stream, "stdout"), g.offset, g.bytes)
        if kind == "exited":
            return exit_from(ev.exited)
        return None

    def attach_request(self, pid: str) -> process_pb2.AttachRequest:
        """The request that resumes pid's stream where this tracker is."""
        req = process_pb2.AttachRequest(id=pid)
        req.from_offset = self.next.get(process_pb2.OUTPUT_STREAM_STDOUT, 0) + self.next.get(
            process_pb2.OUTPUT_STREAM_PTY, 0
        )
        req.stderr_from_offset = self.next.get(process_pb2.OUTPUT_STREAM_STDERR, 0)
        return req


def start_request(
    argv: Optional[Sequence[str]] = None,
    command: str = "",
    *,
    timeout: Optional[Seconds] = None,
    cwd: str = "",
    env: Optional[Mapping[str, str]] = None,
    stdin: Union[bytes, str, None] = None,
    tag: str = "",
    grace: Optional[Seconds] = None,
) -> process_pb2.StartRequest:
    """Builds a StartRequest, refusing bad input before any call."""
    if isinstance(argv, (str, bytes)):  # a str is a Sequence[str] to mypy
        raise TypeError("argv is a list of strings, e.g. ['ls', '-la']; for a command line use sh()")
    req = process_pb2.StartRequest(cwd=cwd, tag=tag)
    if argv is not None:
        if not argv:
            raise ValueError("exec needs a command: argv is empty")
        req.argv.extend(argv)
    else:
        if not command:
            raise ValueError("sh needs a command string")
        req.command = command
    if env:
        for k, v in env.items():
            req.env[k] = v
    if stdin is not None:
        req.stdin = stdin.encode() if isinstance(stdin, str) else stdin
    set_duration(req, "timeout", timeout)
    set_duration(req, "kill_grace", grace)
    return req


class PythonRun:
    """The outcome of :meth:`Target.python`: output, the trailing
    expression's repr, the exception raised (not raised here)."""

    def __init__(self) -> None:
        self._out: List[bytes] = []
        self._err: List[bytes] = []
        #: repr() of the code's trailing expression, if it had one.
        self.result: Optional[str] = None
        #: The exception the code raised (name, value, traceback), if any.
        self.error: Optional[python_pb2.PythonError] = None
        #: True when the timeout interrupted the run (the session survives).
        self.timed_out = False
        #: False when the session's interpreter died and was discarded.
        self.session_alive = True
        #: How long it ran, in seconds.
        self.duration = 0.0

    def add(self, resp: python_pb2.RunResponse) -> None:
        """Takes one event of the run's stream."""
        kind = resp.WhichOneof("event")
        if kind == "output":
            dst = self._err if resp.output.stream == python_pb2.PYTHON_STREAM_STDERR else self._out
            dst.append(resp.output.data)
        elif kind == "result":
            self.result = resp.result.repr
        elif kind == "error":
            self.error = resp.error
        elif kind == "done":
            self.timed_out = resp.done.timed_out
            self.session_alive = resp.done.session_alive
            self.duration = resp.done.duration.ToTimedelta().total_seconds()

    @property
    def stdout(self) -> str:
        """What the code printed to sys.stdout."""
        return b"".join(self._out).decode("utf-8", errors="replace")

    @property
    def stderr(self) -> str:
        """What the code printed to sys.stderr."""
        return b"".join(self._err).decode("utf-8", errors="replace")

    @property
    def text(self) -> str:
        """stdout, then the result's repr on its own line (as agentctl python prints)."""
        out = self.stdout
        if self.result is not None:
            if out and not out.endswith("\n"):
                out += "\n"
            out += self.result + "\n"
        return out

    @property
    def ok(self) -> bool:
        """True when the run neither raised nor timed out."""
        return self.error is None and not self.timed_out


class SearchResult:
    """Matches of :meth:`Files.search` and the summary."""

    def __init__(self) -> None:
        #: The matching lines, with context.
        self.matches: List[files_pb2.SearchMatch] = []
        #: Files scanned, matches, whether it was cut short.
        self.summary: Optional[files_pb2.SearchSummary] = None

    def add(self, resp: files_pb2.SearchResponse) -> None:
        """Takes one message of the search's stream."""
        if resp.WhichOneof("result") == "match":
            self.matches.append(resp.match)
        elif resp.WhichOneof("result") == "summary":
            self.summary = resp.summary
