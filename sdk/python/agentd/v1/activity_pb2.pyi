from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor
OUTCOME_ERROR: Outcome
OUTCOME_OK: Outcome
OUTCOME_STARTED: Outcome
OUTCOME_UNSPECIFIED: Outcome

class ActivityRecord(_message.Message):
    __slots__ = ["actor", "bytes", "claimed_actor", "client", "command", "conversation", "cwd", "duration", "error", "exit_code", "kind", "object_id", "outcome", "output", "path", "seq", "summary", "time"]
    ACTOR_FIELD_NUMBER: _ClassVar[int]
    BYTES_FIELD_NUMBER: _ClassVar[int]
    CLAIMED_ACTOR_FIELD_NUMBER: _ClassVar[int]
    CLIENT_FIELD_NUMBER: _ClassVar[int]
    COMMAND_FIELD_NUMBER: _ClassVar[int]
    CONVERSATION_FIELD_NUMBER: _ClassVar[int]
    CWD_FIELD_NUMBER: _ClassVar[int]
    DURATION_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    EXIT_CODE_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    OBJECT_ID_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    SUMMARY_FIELD_NUMBER: _ClassVar[int]
    TIME_FIELD_NUMBER: _ClassVar[int]
    actor: str
    bytes: int
    claimed_actor: str
    client: str
    command: str
    conversation: str
    cwd: str
    duration: _duration_pb2.Duration
    error: str
    exit_code: int
    kind: str
    object_id: str
    outcome: Outcome
    output: bytes
    path: str
    seq: int
    summary: str
    time: _timestamp_pb2.Timestamp
    def __init__(self, seq: _Optional[int] = ..., time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., actor: _Optional[str] = ..., conversation: _Optional[str] = ..., kind: _Optional[str] = ..., summary: _Optional[str] = ..., command: _Optional[str] = ..., cwd: _Optional[str] = ..., path: _Optional[str] = ..., bytes: _Optional[int] = ..., output: _Optional[bytes] = ..., outcome: _Optional[_Union[Outcome, str]] = ..., error: _Optional[str] = ..., exit_code: _Optional[int] = ..., duration: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ..., object_id: _Optional[str] = ..., claimed_actor: _Optional[str] = ..., client: _Optional[str] = ...) -> None: ...

class WatchRequest(_message.Message):
    __slots__ = ["no_follow", "since_seq", "tail"]
    NO_FOLLOW_FIELD_NUMBER: _ClassVar[int]
    SINCE_SEQ_FIELD_NUMBER: _ClassVar[int]
    TAIL_FIELD_NUMBER: _ClassVar[int]
    no_follow: bool
    since_seq: int
    tail: int
    def __init__(self, since_seq: _Optional[int] = ..., no_follow: bool = ..., tail: _Optional[int] = ...) -> None: ...

class WatchResponse(_message.Message):
    __slots__ = ["record"]
    RECORD_FIELD_NUMBER: _ClassVar[int]
    record: ActivityRecord
    def __init__(self, record: _Optional[_Union[ActivityRecord, _Mapping]] = ...) -> None: ...

class Outcome(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []
