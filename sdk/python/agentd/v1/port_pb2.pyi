from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ConnectRequest(_message.Message):
    __slots__ = ["data", "port", "stream", "stream_token"]
    DATA_FIELD_NUMBER: _ClassVar[int]
    PORT_FIELD_NUMBER: _ClassVar[int]
    STREAM_FIELD_NUMBER: _ClassVar[int]
    STREAM_TOKEN_FIELD_NUMBER: _ClassVar[int]
    data: bytes
    port: int
    stream: bool
    stream_token: str
    def __init__(self, port: _Optional[int] = ..., data: _Optional[bytes] = ..., stream_token: _Optional[str] = ..., stream: bool = ...) -> None: ...

class ConnectResponse(_message.Message):
    __slots__ = ["connected", "data", "eof", "stream", "stream_token"]
    CONNECTED_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    EOF_FIELD_NUMBER: _ClassVar[int]
    STREAM_FIELD_NUMBER: _ClassVar[int]
    STREAM_TOKEN_FIELD_NUMBER: _ClassVar[int]
    connected: bool
    data: bytes
    eof: bool
    stream: bool
    stream_token: str
    def __init__(self, connected: bool = ..., data: _Optional[bytes] = ..., eof: bool = ..., stream: bool = ..., stream_token: _Optional[str] = ...) -> None: ...

class ListeningPort(_message.Message):
    __slots__ = ["address", "command", "network", "pid", "port"]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    COMMAND_FIELD_NUMBER: _ClassVar[int]
    NETWORK_FIELD_NUMBER: _ClassVar[int]
    PID_FIELD_NUMBER: _ClassVar[int]
    PORT_FIELD_NUMBER: _ClassVar[int]
    address: str
    command: str
    network: str
    pid: int
    port: int
    def __init__(self, port: _Optional[int] = ..., address: _Optional[str] = ..., network: _Optional[str] = ..., pid: _Optional[int] = ..., command: _Optional[str] = ...) -> None: ...

class PortServiceListRequest(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class PortServiceListResponse(_message.Message):
    __slots__ = ["ports"]
    PORTS_FIELD_NUMBER: _ClassVar[int]
    ports: _containers.RepeatedCompositeFieldContainer[ListeningPort]
    def __init__(self, ports: _Optional[_Iterable[_Union[ListeningPort, _Mapping]]] = ...) -> None: ...
