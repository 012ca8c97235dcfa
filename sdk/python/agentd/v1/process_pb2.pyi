from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor
OUTPUT_STREAM_PTY: OutputStream
OUTPUT_STREAM_STDERR: OutputStream
OUTPUT_STREAM_STDOUT: OutputStream
OUTPUT_STREAM_UNSPECIFIED: OutputStream
PROCESS_STATE_EXITED: ProcessState
PROCESS_STATE_RUNNING: ProcessState
PROCESS_STATE_UNSPECIFIED: ProcessState

class AttachRequest(_message.Message):
    __slots__ = ["from_offset", "id", "stderr_from_offset"]
    FROM_OFFSET_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    STDERR_FROM_OFFSET_FIELD_NUMBER: _ClassVar[int]
    from_offset: int
    id: str
    stderr_from_offset: int
    def __init__(self, id: _Optional[str] = ..., from_offset: _Optional[int] = ..., stderr_from_offset: _Optional[int] = ...) -> None: ...

class AttachResponse(_message.Message):
    __slots__ = ["event"]
    EVENT_FIELD_NUMBER: _ClassVar[int]
    event: ProcessEvent
    def __init__(self, event: _Optional[_Union[ProcessEvent, _Mapping]] = ...) -> None: ...

class Exited(_message.Message):
    __slots__ = ["duration", "end_time", "exit_code", "reason", "signal", "signal_number", "streams", "timed_out"]
    DURATION_FIELD_NUMBER: _ClassVar[int]
    END_TIME_FIELD_NUMBER: _ClassVar[int]
    EXIT_CODE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    SIGNAL_FIELD_NUMBER: _ClassVar[int]
    SIGNAL_NUMBER_FIELD_NUMBER: _ClassVar[int]
    STREAMS_FIELD_NUMBER: _ClassVar[int]
    TIMED_OUT_FIELD_NUMBER: _ClassVar[int]
    duration: _duration_pb2.Duration
    end_time: _timestamp_pb2.Timestamp
    exit_code: int
    reason: str
    signal: str
    signal_number: int
    streams: _containers.RepeatedCompositeFieldContainer[StreamStats]
    timed_out: bool
    def __init__(self, exit_code: _Optional[int] = ..., signal: _Optional[str] = ..., signal_number: _Optional[int] = ..., timed_out: bool = ..., duration: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ..., streams: _Optional[_Iterable[_Union[StreamStats, _Mapping]]] = ..., end_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., reason: _Optional[str] = ...) -> None: ...

class Gap(_message.Message):
    __slots__ = ["bytes", "offset", "stream"]
    BYTES_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    STREAM_FIELD_NUMBER: _ClassVar[int]
    bytes: int
    offset: int
    stream: OutputStream
    def __init__(self, stream: _Optional[_Union[OutputStream, str]] = ..., offset: _Optional[int] = ..., bytes: _Optional[int] = ...) -> None: ...

class InputRequest(_message.Message):
    __slots__ = ["data", "eof", "id"]
    DATA_FIELD_NUMBER: _ClassVar[int]
    EOF_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    data: bytes
    eof: bool
    id: str
    def __init__(self, id: _Optional[str] = ..., data: _Optional[bytes] = ..., eof: bool = ...) -> None: ...

class InputResponse(_message.Message):
    __slots__ = ["bytes_written"]
    BYTES_WRITTEN_FIELD_NUMBER: _ClassVar[int]
    bytes_written: int
    def __init__(self, bytes_written: _Optional[int] = ...) -> None: ...

class Output(_message.Message):
    __slots__ = ["data", "offset", "stream"]
    DATA_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    STREAM_FIELD_NUMBER: _ClassVar[int]
    data: bytes
    offset: int
    stream: OutputStream
    def __init__(self, stream: _Optional[_Union[OutputStream, str]] = ..., offset: _Optional[int] = ..., data: _Optional[bytes] = ...) -> None: ...

class ProcessEvent(_message.Message):
    __slots__ = ["exited", "gap", "output", "started"]
    EXITED_FIELD_NUMBER: _ClassVar[int]
    GAP_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_FIELD_NUMBER: _ClassVar[int]
    STARTED_FIELD_NUMBER: _ClassVar[int]
    exited: Exited
    gap: Gap
    output: Output
    started: Started
    def __init__(self, started: _Optional[_Union[Started, _Mapping]] = ..., output: _Optional[_Union[Output, _Mapping]] = ..., gap: _Optional[_Union[Gap, _Mapping]] = ..., exited: _Optional[_Union[Exited, _Mapping]] = ...) -> None: ...

class ProcessInfo(_message.Message):
    __slots__ = ["argv", "command", "cwd", "exited", "id", "pid", "pty", "start_time", "state", "stdin_open", "tag"]
    ARGV_FIELD_NUMBER: _ClassVar[int]
    COMMAND_FIELD_NUMBER: _ClassVar[int]
    CWD_FIELD_NUMBER: _ClassVar[int]
    EXITED_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    PID_FIELD_NUMBER: _ClassVar[int]
    PTY_FIELD_NUMBER: _ClassVar[int]
    START_TIME_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    STDIN_OPEN_FIELD_NUMBER: _ClassVar[int]
    TAG_FIELD_NUMBER: _ClassVar[int]
    argv: _containers.RepeatedScalarFieldContainer[str]
    command: str
    cwd: str
    exited: Exited
    id: str
    pid: int
    pty: bool
    start_time: _timestamp_pb2.Timestamp
    state: ProcessState
    stdin_open: bool
    tag: str
    def __init__(self, id: _Optional[str] = ..., pid: _Optional[int] = ..., state: _Optional[_Union[ProcessState, str]] = ..., argv: _Optional[_Iterable[str]] = ..., command: _Optional[str] = ..., cwd: _Optional[str] = ..., tag: _Optional[str] = ..., start_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., exited: _Optional[_Union[Exited, _Mapping]] = ..., pty: bool = ..., stdin_open: bool = ...) -> None: ...

class ProcessServiceListRequest(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class ProcessServiceListResponse(_message.Message):
    __slots__ = ["processes"]
    PROCESSES_FIELD_NUMBER: _ClassVar[int]
    processes: _containers.RepeatedCompositeFieldContainer[ProcessInfo]
    def __init__(self, processes: _Optional[_Iterable[_Union[ProcessInfo, _Mapping]]] = ...) -> None: ...

class PtySize(_message.Message):
    __slots__ = ["cols", "rows"]
    COLS_FIELD_NUMBER: _ClassVar[int]
    ROWS_FIELD_NUMBER: _ClassVar[int]
    cols: int
    rows: int
    def __init__(self, rows: _Optional[int] = ..., cols: _Optional[int] = ...) -> None: ...

class ResizeRequest(_message.Message):
    __slots__ = ["id", "size"]
    ID_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    id: str
    size: PtySize
    def __init__(self, id: _Optional[str] = ..., size: _Optional[_Union[PtySize, _Mapping]] = ...) -> None: ...

class ResizeResponse(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class SignalRequest(_message.Message):
    __slots__ = ["grace", "id", "signal"]
    GRACE_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    SIGNAL_FIELD_NUMBER: _ClassVar[int]
    grace: _duration_pb2.Duration
    id: str
    signal: str
    def __init__(self, id: _Optional[str] = ..., signal: _Optional[str] = ..., grace: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class SignalResponse(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class StartRequest(_message.Message):
    __slots__ = ["argv", "command", "cwd", "env", "kill_grace", "open_stdin", "pty", "retain_head_bytes", "retain_tail_bytes", "stdin", "tag", "timeout"]
    class EnvEntry(_message.Message):
        __slots__ = ["key", "value"]
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    ARGV_FIELD_NUMBER: _ClassVar[int]
    COMMAND_FIELD_NUMBER: _ClassVar[int]
    CWD_FIELD_NUMBER: _ClassVar[int]
    ENV_FIELD_NUMBER: _ClassVar[int]
    KILL_GRACE_FIELD_NUMBER: _ClassVar[int]
    OPEN_STDIN_FIELD_NUMBER: _ClassVar[int]
    PTY_FIELD_NUMBER: _ClassVar[int]
    RETAIN_HEAD_BYTES_FIELD_NUMBER: _ClassVar[int]
    RETAIN_TAIL_BYTES_FIELD_NUMBER: _ClassVar[int]
    STDIN_FIELD_NUMBER: _ClassVar[int]
    TAG_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    argv: _containers.RepeatedScalarFieldContainer[str]
    command: str
    cwd: str
    env: _containers.ScalarMap[str, str]
    kill_grace: _duration_pb2.Duration
    open_stdin: bool
    pty: PtySize
    retain_head_bytes: int
    retain_tail_bytes: int
    stdin: bytes
    tag: str
    timeout: _duration_pb2.Duration
    def __init__(self, argv: _Optional[_Iterable[str]] = ..., command: _Optional[str] = ..., cwd: _Optional[str] = ..., env: _Optional[_Mapping[str, str]] = ..., stdin: _Optional[bytes] = ..., open_stdin: bool = ..., pty: _Optional[_Union[PtySize, _Mapping]] = ..., timeout: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ..., kill_grace: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ..., retain_head_bytes: _Optional[int] = ..., retain_tail_bytes: _Optional[int] = ..., tag: _Optional[str] = ...) -> None: ...

class StartResponse(_message.Message):
    __slots__ = ["event"]
    EVENT_FIELD_NUMBER: _ClassVar[int]
    event: ProcessEvent
    def __init__(self, event: _Optional[_Union[ProcessEvent, _Mapping]] = ...) -> None: ...

class Started(_message.Message):
    __slots__ = ["id", "pid", "start_time"]
    ID_FIELD_NUMBER: _ClassVar[int]
    PID_FIELD_NUMBER: _ClassVar[int]
    START_TIME_FIELD_NUMBER: _ClassVar[int]
    id: str
    pid: int
    start_time: _timestamp_pb2.Timestamp
    def __init__(self, id: _Optional[str] = ..., pid: _Optional[int] = ..., start_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class StreamStats(_message.Message):
    __slots__ = ["omitted_bytes", "stream", "total_bytes"]
    OMITTED_BYTES_FIELD_NUMBER: _ClassVar[int]
    STREAM_FIELD_NUMBER: _ClassVar[int]
    TOTAL_BYTES_FIELD_NUMBER: _ClassVar[int]
    omitted_bytes: int
    stream: OutputStream
    total_bytes: int
    def __init__(self, stream: _Optional[_Union[OutputStream, str]] = ..., total_bytes: _Optional[int] = ..., omitted_bytes: _Optional[int] = ...) -> None: ...

class WaitRequest(_message.Message):
    __slots__ = ["id"]
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class WaitResponse(_message.Message):
    __slots__ = ["process"]
    PROCESS_FIELD_NUMBER: _ClassVar[int]
    process: ProcessInfo
    def __init__(self, process: _Optional[_Union[ProcessInfo, _Mapping]] = ...) -> None: ...

class OutputStream(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class ProcessState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []
