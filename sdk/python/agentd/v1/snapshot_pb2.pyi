from agentd.v1 import files_pb2 as _files_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

CHANGE_KIND_ADDED: ChangeKind
CHANGE_KIND_MODIFIED: ChangeKind
CHANGE_KIND_REMOVED: ChangeKind
CHANGE_KIND_TYPE_CHANGED: ChangeKind
CHANGE_KIND_UNSPECIFIED: ChangeKind
DESCRIPTOR: _descriptor.FileDescriptor

class CreateRequest(_message.Message):
    __slots__ = ["excludes", "label", "root"]
    EXCLUDES_FIELD_NUMBER: _ClassVar[int]
    LABEL_FIELD_NUMBER: _ClassVar[int]
    ROOT_FIELD_NUMBER: _ClassVar[int]
    excludes: _containers.RepeatedScalarFieldContainer[str]
    label: str
    root: str
    def __init__(self, root: _Optional[str] = ..., excludes: _Optional[_Iterable[str]] = ..., label: _Optional[str] = ...) -> None: ...

class CreateResponse(_message.Message):
    __slots__ = ["progress", "snapshot"]
    PROGRESS_FIELD_NUMBER: _ClassVar[int]
    SNAPSHOT_FIELD_NUMBER: _ClassVar[int]
    progress: Progress
    snapshot: Snapshot
    def __init__(self, progress: _Optional[_Union[Progress, _Mapping]] = ..., snapshot: _Optional[_Union[Snapshot, _Mapping]] = ...) -> None: ...

class DeleteRequest(_message.Message):
    __slots__ = ["id"]
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class DeleteResponse(_message.Message):
    __slots__ = ["freed_bytes"]
    FREED_BYTES_FIELD_NUMBER: _ClassVar[int]
    freed_bytes: int
    def __init__(self, freed_bytes: _Optional[int] = ...) -> None: ...

class DiffEntry(_message.Message):
    __slots__ = ["kind", "path", "to"]
    FROM_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    TO_FIELD_NUMBER: _ClassVar[int]
    kind: ChangeKind
    path: str
    to: SnapshotEntry
    def __init__(self, path: _Optional[str] = ..., kind: _Optional[_Union[ChangeKind, str]] = ..., to: _Optional[_Union[SnapshotEntry, _Mapping]] = ..., **kwargs) -> None: ...

class DiffRequest(_message.Message):
    __slots__ = ["from_id", "to_id"]
    FROM_ID_FIELD_NUMBER: _ClassVar[int]
    TO_ID_FIELD_NUMBER: _ClassVar[int]
    from_id: str
    to_id: str
    def __init__(self, from_id: _Optional[str] = ..., to_id: _Optional[str] = ...) -> None: ...

class DiffResponse(_message.Message):
    __slots__ = ["changes"]
    CHANGES_FIELD_NUMBER: _ClassVar[int]
    changes: _containers.RepeatedCompositeFieldContainer[DiffEntry]
    def __init__(self, changes: _Optional[_Iterable[_Union[DiffEntry, _Mapping]]] = ...) -> None: ...

class ExportRequest(_message.Message):
    __slots__ = ["id"]
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class ExportResponse(_message.Message):
    __slots__ = ["data"]
    DATA_FIELD_NUMBER: _ClassVar[int]
    data: bytes
    def __init__(self, data: _Optional[bytes] = ...) -> None: ...

class GetRequest(_message.Message):
    __slots__ = ["id"]
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class GetResponse(_message.Message):
    __slots__ = ["entries", "snapshot"]
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    SNAPSHOT_FIELD_NUMBER: _ClassVar[int]
    entries: _containers.RepeatedCompositeFieldContainer[SnapshotEntry]
    snapshot: Snapshot
    def __init__(self, snapshot: _Optional[_Union[Snapshot, _Mapping]] = ..., entries: _Optional[_Iterable[_Union[SnapshotEntry, _Mapping]]] = ...) -> None: ...

class ImportHeader(_message.Message):
    __slots__ = ["label", "root"]
    LABEL_FIELD_NUMBER: _ClassVar[int]
    ROOT_FIELD_NUMBER: _ClassVar[int]
    label: str
    root: str
    def __init__(self, label: _Optional[str] = ..., root: _Optional[str] = ...) -> None: ...

class ImportRequest(_message.Message):
    __slots__ = ["data", "header"]
    DATA_FIELD_NUMBER: _ClassVar[int]
    HEADER_FIELD_NUMBER: _ClassVar[int]
    data: bytes
    header: ImportHeader
    def __init__(self, header: _Optional[_Union[ImportHeader, _Mapping]] = ..., data: _Optional[bytes] = ...) -> None: ...

class ImportResponse(_message.Message):
    __slots__ = ["snapshot"]
    SNAPSHOT_FIELD_NUMBER: _ClassVar[int]
    snapshot: Snapshot
    def __init__(self, snapshot: _Optional[_Union[Snapshot, _Mapping]] = ...) -> None: ...

class Progress(_message.Message):
    __slots__ = ["bytes_done", "bytes_total", "files_done", "files_total"]
    BYTES_DONE_FIELD_NUMBER: _ClassVar[int]
    BYTES_TOTAL_FIELD_NUMBER: _ClassVar[int]
    FILES_DONE_FIELD_NUMBER: _ClassVar[int]
    FILES_TOTAL_FIELD_NUMBER: _ClassVar[int]
    bytes_done: int
    bytes_total: int
    files_done: int
    files_total: int
    def __init__(self, files_done: _Optional[int] = ..., files_total: _Optional[int] = ..., bytes_done: _Optional[int] = ..., bytes_total: _Optional[int] = ...) -> None: ...

class RestoreRequest(_message.Message):
    __slots__ = ["delete_extra", "id", "target"]
    DELETE_EXTRA_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    delete_extra: bool
    id: str
    target: str
    def __init__(self, id: _Optional[str] = ..., target: _Optional[str] = ..., delete_extra: bool = ...) -> None: ...

class RestoreResponse(_message.Message):
    __slots__ = ["progress", "summary"]
    PROGRESS_FIELD_NUMBER: _ClassVar[int]
    SUMMARY_FIELD_NUMBER: _ClassVar[int]
    progress: Progress
    summary: RestoreSummary
    def __init__(self, progress: _Optional[_Union[Progress, _Mapping]] = ..., summary: _Optional[_Union[RestoreSummary, _Mapping]] = ...) -> None: ...

class RestoreSummary(_message.Message):
    __slots__ = ["files_unchanged", "files_written", "paths_removed", "target"]
    FILES_UNCHANGED_FIELD_NUMBER: _ClassVar[int]
    FILES_WRITTEN_FIELD_NUMBER: _ClassVar[int]
    PATHS_REMOVED_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    files_unchanged: int
    files_written: int
    paths_removed: int
    target: str
    def __init__(self, files_written: _Optional[int] = ..., files_unchanged: _Optional[int] = ..., paths_removed: _Optional[int] = ..., target: _Optional[str] = ...) -> None: ...

class Snapshot(_message.Message):
    __slots__ = ["created", "directories", "files", "id", "label", "root", "skipped", "stored_bytes", "symlinks", "total_bytes"]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    DIRECTORIES_FIELD_NUMBER: _ClassVar[int]
    FILES_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    LABEL_FIELD_NUMBER: _ClassVar[int]
    ROOT_FIELD_NUMBER: _ClassVar[int]
    SKIPPED_FIELD_NUMBER: _ClassVar[int]
    STORED_BYTES_FIELD_NUMBER: _ClassVar[int]
    SYMLINKS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_BYTES_FIELD_NUMBER: _ClassVar[int]
    created: _timestamp_pb2.Timestamp
    directories: int
    files: int
    id: str
    label: str
    root: str
    skipped: _containers.RepeatedScalarFieldContainer[str]
    stored_bytes: int
    symlinks: int
    total_bytes: int
    def __init__(self, id: _Optional[str] = ..., label: _Optional[str] = ..., root: _Optional[str] = ..., created: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., files: _Optional[int] = ..., directories: _Optional[int] = ..., symlinks: _Optional[int] = ..., total_bytes: _Optional[int] = ..., stored_bytes: _Optional[int] = ..., skipped: _Optional[_Iterable[str]] = ...) -> None: ...

class SnapshotEntry(_message.Message):
    __slots__ = ["mode", "modified", "path", "sha256", "size", "symlink_target", "type"]
    MODE_FIELD_NUMBER: _ClassVar[int]
    MODIFIED_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    SHA256_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    SYMLINK_TARGET_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    mode: int
    modified: _timestamp_pb2.Timestamp
    path: str
    sha256: str
    size: int
    symlink_target: str
    type: _files_pb2.FileType
    def __init__(self, path: _Optional[str] = ..., type: _Optional[_Union[_files_pb2.FileType, str]] = ..., mode: _Optional[int] = ..., size: _Optional[int] = ..., sha256: _Optional[str] = ..., symlink_target: _Optional[str] = ..., modified: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class SnapshotServiceListRequest(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class SnapshotServiceListResponse(_message.Message):
    __slots__ = ["snapshots"]
    SNAPSHOTS_FIELD_NUMBER: _ClassVar[int]
    snapshots: _containers.RepeatedCompositeFieldContainer[Snapshot]
    def __init__(self, snapshots: _Optional[_Iterable[_Union[Snapshot, _Mapping]]] = ...) -> None: ...

class ChangeKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []
