from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class InfoRequest(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class InfoResponse(_message.Message):
    __slots__ = ["arch", "capabilities", "cpus", "disk_free_bytes", "environment", "home", "hostname", "image", "isolation", "memory_available_bytes", "memory_bytes", "mode", "os", "os_version", "platform", "python_version", "shell", "started", "tunnel", "uid", "user", "version", "workspace"]
    ARCH_FIELD_NUMBER: _ClassVar[int]
    CAPABILITIES_FIELD_NUMBER: _ClassVar[int]
    CPUS_FIELD_NUMBER: _ClassVar[int]
    DISK_FREE_BYTES_FIELD_NUMBER: _ClassVar[int]
    ENVIRONMENT_FIELD_NUMBER: _ClassVar[int]
    HOME_FIELD_NUMBER: _ClassVar[int]
    HOSTNAME_FIELD_NUMBER: _ClassVar[int]
    IMAGE_FIELD_NUMBER: _ClassVar[int]
    ISOLATION_FIELD_NUMBER: _ClassVar[int]
    MEMORY_AVAILABLE_BYTES_FIELD_NUMBER: _ClassVar[int]
    MEMORY_BYTES_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    OS_FIELD_NUMBER: _ClassVar[int]
    OS_VERSION_FIELD_NUMBER: _ClassVar[int]
    PLATFORM_FIELD_NUMBER: _ClassVar[int]
    PYTHON_VERSION_FIELD_NUMBER: _ClassVar[int]
    SHELL_FIELD_NUMBER: _ClassVar[int]
    STARTED_FIELD_NUMBER: _ClassVar[int]
    TUNNEL_FIELD_NUMBER: _ClassVar[int]
    UID_FIELD_NUMBER: _ClassVar[int]
    USER_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    WORKSPACE_FIELD_NUMBER: _ClassVar[int]
    arch: str
    capabilities: _containers.RepeatedScalarFieldContainer[str]
    cpus: int
    disk_free_bytes: int
    environment: str
    home: str
    hostname: str
    image: str
    isolation: str
    memory_available_bytes: int
    memory_bytes: int
    mode: str
    os: str
    os_version: str
    platform: str
    python_version: str
    shell: str
    started: _timestamp_pb2.Timestamp
    tunnel: TunnelStatus
    uid: int
    user: str
    version: str
    workspace: str
    def __init__(self, version: _Optional[str] = ..., mode: _Optional[str] = ..., hostname: _Optional[str] = ..., os: _Optional[str] = ..., arch: _Optional[str] = ..., user: _Optional[str] = ..., uid: _Optional[int] = ..., home: _Optional[str] = ..., workspace: _Optional[str] = ..., shell: _Optional[str] = ..., cpus: _Optional[int] = ..., memory_bytes: _Optional[int] = ..., disk_free_bytes: _Optional[int] = ..., python_version: _Optional[str] = ..., capabilities: _Optional[_Iterable[str]] = ..., os_version: _Optional[str] = ..., memory_available_bytes: _Optional[int] = ..., started: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., tunnel: _Optional[_Union[TunnelStatus, _Mapping]] = ..., environment: _Optional[str] = ..., image: _Optional[str] = ..., isolation: _Optional[str] = ..., platform: _Optional[str] = ...) -> None: ...

class InventoryRequest(_message.Message):
    __slots__ = ["base", "no_versions"]
    BASE_FIELD_NUMBER: _ClassVar[int]
    NO_VERSIONS_FIELD_NUMBER: _ClassVar[int]
    base: InventoryResponse
    no_versions: bool
    def __init__(self, base: _Optional[_Union[InventoryResponse, _Mapping]] = ..., no_versions: bool = ...) -> None: ...

class InventoryResponse(_message.Message):
    __slots__ = ["python_packages", "tools"]
    PYTHON_PACKAGES_FIELD_NUMBER: _ClassVar[int]
    TOOLS_FIELD_NUMBER: _ClassVar[int]
    python_packages: _containers.RepeatedCompositeFieldContainer[PythonPackage]
    tools: _containers.RepeatedCompositeFieldContainer[Tool]
    def __init__(self, tools: _Optional[_Iterable[_Union[Tool, _Mapping]]] = ..., python_packages: _Optional[_Iterable[_Union[PythonPackage, _Mapping]]] = ...) -> None: ...

class PythonPackage(_message.Message):
    __slots__ = ["name", "version"]
    NAME_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    name: str
    version: str
    def __init__(self, name: _Optional[str] = ..., version: _Optional[str] = ...) -> None: ...

class StatsRequest(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class StatsResponse(_message.Message):
    __slots__ = ["commands", "cpu_nanos", "cpus", "load1", "load15", "load5", "memory_available_bytes", "memory_bytes", "memory_total_bytes", "process_stats", "processes", "sampled"]
    COMMANDS_FIELD_NUMBER: _ClassVar[int]
    CPUS_FIELD_NUMBER: _ClassVar[int]
    CPU_NANOS_FIELD_NUMBER: _ClassVar[int]
    LOAD15_FIELD_NUMBER: _ClassVar[int]
    LOAD1_FIELD_NUMBER: _ClassVar[int]
    LOAD5_FIELD_NUMBER: _ClassVar[int]
    MEMORY_AVAILABLE_BYTES_FIELD_NUMBER: _ClassVar[int]
    MEMORY_BYTES_FIELD_NUMBER: _ClassVar[int]
    MEMORY_TOTAL_BYTES_FIELD_NUMBER: _ClassVar[int]
    PROCESSES_FIELD_NUMBER: _ClassVar[int]
    PROCESS_STATS_FIELD_NUMBER: _ClassVar[int]
    SAMPLED_FIELD_NUMBER: _ClassVar[int]
    commands: int
    cpu_nanos: int
    cpus: int
    load1: float
    load15: float
    load5: float
    memory_available_bytes: int
    memory_bytes: int
    memory_total_bytes: int
    process_stats: bool
    processes: int
    sampled: _timestamp_pb2.Timestamp
    def __init__(self, sampled: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., cpu_nanos: _Optional[int] = ..., memory_bytes: _Optional[int] = ..., processes: _Optional[int] = ..., commands: _Optional[int] = ..., load1: _Optional[float] = ..., load5: _Optional[float] = ..., load15: _Optional[float] = ..., cpus: _Optional[int] = ..., memory_total_bytes: _Optional[int] = ..., memory_available_bytes: _Optional[int] = ..., process_stats: bool = ...) -> None: ...

class Tool(_message.Message):
    __slots__ = ["name", "path", "version"]
    NAME_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    name: str
    path: str
    version: str
    def __init__(self, name: _Optional[str] = ..., path: _Optional[str] = ..., version: _Optional[str] = ...) -> None: ...

class TunnelStatus(_message.Message):
    __slots__ = ["connected_since", "hub", "last_error", "machine_id", "next_attempt", "org", "since", "state"]
    CONNECTED_SINCE_FIELD_NUMBER: _ClassVar[int]
    HUB_FIELD_NUMBER: _ClassVar[int]
    LAST_ERROR_FIELD_NUMBER: _ClassVar[int]
    MACHINE_ID_FIELD_NUMBER: _ClassVar[int]
    NEXT_ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    ORG_FIELD_NUMBER: _ClassVar[int]
    SINCE_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    connected_since: _timestamp_pb2.Timestamp
    hub: str
    last_error: str
    machine_id: str
    next_attempt: _timestamp_pb2.Timestamp
    org: str
    since: _timestamp_pb2.Timestamp
    state: str
    def __init__(self, hub: _Optional[str] = ..., machine_id: _Optional[str] = ..., state: _Optional[str] = ..., since: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., connected_since: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., last_error: _Optional[str] = ..., next_attempt: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., org: _Optional[str] = ...) -> None: ...
