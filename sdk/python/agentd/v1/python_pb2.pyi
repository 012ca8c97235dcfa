from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor
PYTHON_STREAM_STDERR: PythonStream
PYTHON_STREAM_STDOUT: PythonStream
PYTHON_STREAM_UNSPECIFIED: PythonStream

class CloseSessionRequest(_message.Message):
    __slots__ = ["session"]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    session: str
    def __init__(self, session: _Optional[str] = ...) -> None: ...

class CloseSessionResponse(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class ListSessionsRequest(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class ListSessionsResponse(_message.Message):
    __slots__ = ["sessions"]
    SESSIONS_FIELD_NUMBER: _ClassVar[int]
    sessions: _containers.RepeatedCompositeFieldContainer[PythonSession]
    def __init__(self, sessions: _Optional[_Iterable[_Union[PythonSession, _Mapping]]] = ...) -> None: ...

class PythonDone(_message.Message):
    __slots__ = ["duration", "failed", "session_alive", "timed_out"]
    DURATION_FIELD_NUMBER: _ClassVar[int]
    FAILED_FIELD_NUMBER: _ClassVar[int]
    SESSION_ALIVE_FIELD_NUMBER: _ClassVar[int]
    TIMED_OUT_FIELD_NUMBER: _ClassVar[int]
    duration: _duration_pb2.Duration
    failed: bool
    session_alive: bool
    timed_out: bool
    def __init__(self, duration: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ..., timed_out: bool = ..., failed: bool = ..., session_alive: bool = ...) -> None: ...

class PythonError(_message.Message):
    __slots__ = ["name", "traceback", "value"]
    NAME_FIELD_NUMBER: _ClassVar[int]
    TRACEBACK_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    name: str
    traceback: str
    value: str
    def __init__(self, name: _Optional[str] = ..., value: _Optional[str] = ..., traceback: _Optional[str] = ...) -> None: ...

class PythonOutput(_message.Message):
    __slots__ = ["data", "stream"]
    DATA_FIELD_NUMBER: _ClassVar[int]
    STREAM_FIELD_NUMBER: _ClassVar[int]
    data: bytes
    stream: PythonStream
    def __init__(self, stream: _Optional[_Union[PythonStream, str]] = ..., data: _Optional[bytes] = ...) -> None: ...

class PythonResult(_message.Message):
    __slots__ = ["repr"]
    REPR_FIELD_NUMBER: _ClassVar[int]
    repr: str
    def __init__(self, repr: _Optional[str] = ...) -> None: ...

class PythonSession(_message.Message):
    __slots__ = ["busy", "created", "last_used", "name", "pid", "runs"]
    BUSY_FIELD_NUMBER: _ClassVar[int]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    LAST_USED_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    PID_FIELD_NUMBER: _ClassVar[int]
    RUNS_FIELD_NUMBER: _ClassVar[int]
    busy: bool
    created: _timestamp_pb2.Timestamp
    last_used: _timestamp_pb2.Timestamp
    name: str
    pid: int
    runs: int
    def __init__(self, name: _Optional[str] = ..., pid: _Optional[int] = ..., created: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., last_used: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., runs: _Optional[int] = ..., busy: bool = ...) -> None: ...

class ResetSessionRequest(_message.Message):
    __slots__ = ["session"]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    session: str
    def __init__(self, session: _Optional[str] = ...) -> None: ...

class ResetSessionResponse(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class RunRequest(_message.Message):
    __slots__ = ["code", "cwd", "env", "session", "timeout"]
    class EnvEntry(_message.Message):
        __slots__ = ["key", "value"]
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    CODE_FIELD_NUMBER: _ClassVar[int]
    CWD_FIELD_NUMBER: _ClassVar[int]
    ENV_FIELD_NUMBER: _ClassVar[int]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    code: str
    cwd: str
    env: _containers.ScalarMap[str, str]
    session: str
    timeout: _duration_pb2.Duration
    def __init__(self, code: _Optional[str] = ..., session: _Optional[str] = ..., timeout: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ..., cwd: _Optional[str] = ..., env: _Optional[_Mapping[str, str]] = ...) -> None: ...

class RunResponse(_message.Message):
    __slots__ = ["done", "error", "output", "result"]
    DONE_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    done: PythonDone
    error: PythonError
    output: PythonOutput
    result: PythonResult
    def __init__(self, output: _Optional[_Union[PythonOutput, _Mapping]] = ..., result: _Optional[_Union[PythonResult, _Mapping]] = ..., error: _Optional[_Union[PythonError, _Mapping]] = ..., done: _Optional[_Union[PythonDone, _Mapping]] = ...) -> None: ...

class PythonStream(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []
