from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor
FILE_EVENT_KIND_ATTRIBUTES: FileEventKind
FILE_EVENT_KIND_CREATED: FileEventKind
FILE_EVENT_KIND_REMOVED: FileEventKind
FILE_EVENT_KIND_RENAMED: FileEventKind
FILE_EVENT_KIND_UNSPECIFIED: FileEventKind
FILE_EVENT_KIND_WRITTEN: FileEventKind
FILE_TYPE_DIRECTORY: FileType
FILE_TYPE_FILE: FileType
FILE_TYPE_OTHER: FileType
FILE_TYPE_SYMLINK: FileType
FILE_TYPE_UNSPECIFIED: FileType

class EditRequest(_message.Message):
    __slots__ = ["dry_run", "edits", "expected_sha256", "path"]
    DRY_RUN_FIELD_NUMBER: _ClassVar[int]
    EDITS_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_SHA256_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    dry_run: bool
    edits: _containers.RepeatedCompositeFieldContainer[Replacement]
    expected_sha256: str
    path: str
    def __init__(self, path: _Optional[str] = ..., edits: _Optional[_Iterable[_Union[Replacement, _Mapping]]] = ..., expected_sha256: _Optional[str] = ..., dry_run: bool = ...) -> None: ...

class EditResponse(_message.Message):
    __slots__ = ["diff", "path", "replacements", "sha256"]
    DIFF_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    REPLACEMENTS_FIELD_NUMBER: _ClassVar[int]
    SHA256_FIELD_NUMBER: _ClassVar[int]
    diff: str
    path: str
    replacements: int
    sha256: str
    def __init__(self, replacements: _Optional[int] = ..., diff: _Optional[str] = ..., sha256: _Optional[str] = ..., path: _Optional[str] = ...) -> None: ...

class FileEvent(_message.Message):
    __slots__ = ["directory", "kind", "path"]
    DIRECTORY_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    directory: bool
    kind: FileEventKind
    path: str
    def __init__(self, path: _Optional[str] = ..., kind: _Optional[_Union[FileEventKind, str]] = ..., directory: bool = ...) -> None: ...

class FileEventBatch(_message.Message):
    __slots__ = ["events"]
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    events: _containers.RepeatedCompositeFieldContainer[FileEvent]
    def __init__(self, events: _Optional[_Iterable[_Union[FileEvent, _Mapping]]] = ...) -> None: ...

class FileInfo(_message.Message):
    __slots__ = ["gid", "mode", "modified", "name", "path", "raw_path", "size", "symlink_target", "type", "uid"]
    GID_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    MODIFIED_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    RAW_PATH_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    SYMLINK_TARGET_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    UID_FIELD_NUMBER: _ClassVar[int]
    gid: int
    mode: int
    modified: _timestamp_pb2.Timestamp
    name: str
    path: str
    raw_path: bytes
    size: int
    symlink_target: str
    type: FileType
    uid: int
    def __init__(self, path: _Optional[str] = ..., name: _Optional[str] = ..., type: _Optional[_Union[FileType, str]] = ..., size: _Optional[int] = ..., mode: _Optional[int] = ..., modified: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., symlink_target: _Optional[str] = ..., uid: _Optional[int] = ..., gid: _Optional[int] = ..., raw_path: _Optional[bytes] = ...) -> None: ...

class FileServiceListRequest(_message.Message):
    __slots__ = ["depth", "hidden", "max_entries", "path"]
    DEPTH_FIELD_NUMBER: _ClassVar[int]
    HIDDEN_FIELD_NUMBER: _ClassVar[int]
    MAX_ENTRIES_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    depth: int
    hidden: bool
    max_entries: int
    path: str
    def __init__(self, path: _Optional[str] = ..., depth: _Optional[int] = ..., hidden: bool = ..., max_entries: _Optional[int] = ...) -> None: ...

class FileServiceListResponse(_message.Message):
    __slots__ = ["entries", "truncated"]
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    TRUNCATED_FIELD_NUMBER: _ClassVar[int]
    entries: _containers.RepeatedCompositeFieldContainer[FileInfo]
    truncated: bool
    def __init__(self, entries: _Optional[_Iterable[_Union[FileInfo, _Mapping]]] = ..., truncated: bool = ...) -> None: ...

class GlobRequest(_message.Message):
    __slots__ = ["hidden", "max_results", "no_ignore", "path", "pattern"]
    HIDDEN_FIELD_NUMBER: _ClassVar[int]
    MAX_RESULTS_FIELD_NUMBER: _ClassVar[int]
    NO_IGNORE_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    PATTERN_FIELD_NUMBER: _ClassVar[int]
    hidden: bool
    max_results: int
    no_ignore: bool
    path: str
    pattern: str
    def __init__(self, pattern: _Optional[str] = ..., path: _Optional[str] = ..., no_ignore: bool = ..., max_results: _Optional[int] = ..., hidden: bool = ...) -> None: ...

class GlobResponse(_message.Message):
    __slots__ = ["paths", "truncated"]
    PATHS_FIELD_NUMBER: _ClassVar[int]
    TRUNCATED_FIELD_NUMBER: _ClassVar[int]
    paths: _containers.RepeatedScalarFieldContainer[str]
    truncated: bool
    def __init__(self, paths: _Optional[_Iterable[str]] = ..., truncated: bool = ...) -> None: ...

class MakeDirRequest(_message.Message):
    __slots__ = ["mode", "parents", "path"]
    MODE_FIELD_NUMBER: _ClassVar[int]
    PARENTS_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    mode: int
    parents: bool
    path: str
    def __init__(self, path: _Optional[str] = ..., parents: bool = ..., mode: _Optional[int] = ...) -> None: ...

class MakeDirResponse(_message.Message):
    __slots__ = ["info"]
    INFO_FIELD_NUMBER: _ClassVar[int]
    info: FileInfo
    def __init__(self, info: _Optional[_Union[FileInfo, _Mapping]] = ...) -> None: ...

class MoveRequest(_message.Message):
    __slots__ = ["destination", "overwrite", "source"]
    DESTINATION_FIELD_NUMBER: _ClassVar[int]
    OVERWRITE_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    destination: str
    overwrite: bool
    source: str
    def __init__(self, source: _Optional[str] = ..., destination: _Optional[str] = ..., overwrite: bool = ...) -> None: ...

class MoveResponse(_message.Message):
    __slots__ = ["info"]
    INFO_FIELD_NUMBER: _ClassVar[int]
    info: FileInfo
    def __init__(self, info: _Optional[_Union[FileInfo, _Mapping]] = ...) -> None: ...

class ReadLinesRequest(_message.Message):
    __slots__ = ["count", "from_line", "max_line_length", "path"]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    FROM_LINE_FIELD_NUMBER: _ClassVar[int]
    MAX_LINE_LENGTH_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    count: int
    from_line: int
    max_line_length: int
    path: str
    def __init__(self, path: _Optional[str] = ..., from_line: _Optional[int] = ..., count: _Optional[int] = ..., max_line_length: _Optional[int] = ...) -> None: ...

class ReadLinesResponse(_message.Message):
    __slots__ = ["cut_lines", "from_line", "lines", "more", "sha256", "size", "total_lines"]
    CUT_LINES_FIELD_NUMBER: _ClassVar[int]
    FROM_LINE_FIELD_NUMBER: _ClassVar[int]
    LINES_FIELD_NUMBER: _ClassVar[int]
    MORE_FIELD_NUMBER: _ClassVar[int]
    SHA256_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    TOTAL_LINES_FIELD_NUMBER: _ClassVar[int]
    cut_lines: _containers.RepeatedScalarFieldContainer[int]
    from_line: int
    lines: _containers.RepeatedScalarFieldContainer[str]
    more: bool
    sha256: str
    size: int
    total_lines: int
    def __init__(self, lines: _Optional[_Iterable[str]] = ..., from_line: _Optional[int] = ..., total_lines: _Optional[int] = ..., more: bool = ..., cut_lines: _Optional[_Iterable[int]] = ..., size: _Optional[int] = ..., sha256: _Optional[str] = ...) -> None: ...

class ReadRequest(_message.Message):
    __slots__ = ["limit", "offset", "path"]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    limit: int
    offset: int
    path: str
    def __init__(self, path: _Optional[str] = ..., offset: _Optional[int] = ..., limit: _Optional[int] = ...) -> None: ...

class ReadResponse(_message.Message):
    __slots__ = ["data", "info", "offset"]
    DATA_FIELD_NUMBER: _ClassVar[int]
    INFO_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    data: bytes
    info: FileInfo
    offset: int
    def __init__(self, data: _Optional[bytes] = ..., offset: _Optional[int] = ..., info: _Optional[_Union[FileInfo, _Mapping]] = ...) -> None: ...

class RemoveRequest(_message.Message):
    __slots__ = ["path", "recursive"]
    PATH_FIELD_NUMBER: _ClassVar[int]
    RECURSIVE_FIELD_NUMBER: _ClassVar[int]
    path: str
    recursive: bool
    def __init__(self, path: _Optional[str] = ..., recursive: bool = ...) -> None: ...

class RemoveResponse(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class Replacement(_message.Message):
    __slots__ = ["new_string", "old_string", "replace_all"]
    NEW_STRING_FIELD_NUMBER: _ClassVar[int]
    OLD_STRING_FIELD_NUMBER: _ClassVar[int]
    REPLACE_ALL_FIELD_NUMBER: _ClassVar[int]
    new_string: str
    old_string: str
    replace_all: bool
    def __init__(self, old_string: _Optional[str] = ..., new_string: _Optional[str] = ..., replace_all: bool = ...) -> None: ...

class SearchMatch(_message.Message):
    __slots__ = ["after", "before", "line", "line_number", "path"]
    AFTER_FIELD_NUMBER: _ClassVar[int]
    BEFORE_FIELD_NUMBER: _ClassVar[int]
    LINE_FIELD_NUMBER: _ClassVar[int]
    LINE_NUMBER_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    after: _containers.RepeatedScalarFieldContainer[str]
    before: _containers.RepeatedScalarFieldContainer[str]
    line: str
    line_number: int
    path: str
    def __init__(self, path: _Optional[str] = ..., line_number: _Optional[int] = ..., line: _Optional[str] = ..., before: _Optional[_Iterable[str]] = ..., after: _Optional[_Iterable[str]] = ...) -> None: ...

class SearchRequest(_message.Message):
    __slots__ = ["binary", "context_lines", "exclude", "fixed_string", "hidden", "ignore_case", "include", "max_matches", "no_ignore", "path", "pattern"]
    BINARY_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_LINES_FIELD_NUMBER: _ClassVar[int]
    EXCLUDE_FIELD_NUMBER: _ClassVar[int]
    FIXED_STRING_FIELD_NUMBER: _ClassVar[int]
    HIDDEN_FIELD_NUMBER: _ClassVar[int]
    IGNORE_CASE_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_FIELD_NUMBER: _ClassVar[int]
    MAX_MATCHES_FIELD_NUMBER: _ClassVar[int]
    NO_IGNORE_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    PATTERN_FIELD_NUMBER: _ClassVar[int]
    binary: bool
    context_lines: int
    exclude: _containers.RepeatedScalarFieldContainer[str]
    fixed_string: bool
    hidden: bool
    ignore_case: bool
    include: _containers.RepeatedScalarFieldContainer[str]
    max_matches: int
    no_ignore: bool
    path: str
    pattern: str
    def __init__(self, pattern: _Optional[str] = ..., path: _Optional[str] = ..., fixed_string: bool = ..., ignore_case: bool = ..., include: _Optional[_Iterable[str]] = ..., exclude: _Optional[_Iterable[str]] = ..., context_lines: _Optional[int] = ..., max_matches: _Optional[int] = ..., hidden: bool = ..., no_ignore: bool = ..., binary: bool = ...) -> None: ...

class SearchResponse(_message.Message):
    __slots__ = ["match", "summary"]
    MATCH_FIELD_NUMBER: _ClassVar[int]
    SUMMARY_FIELD_NUMBER: _ClassVar[int]
    match: SearchMatch
    summary: SearchSummary
    def __init__(self, match: _Optional[_Union[SearchMatch, _Mapping]] = ..., summary: _Optional[_Union[SearchSummary, _Mapping]] = ...) -> None: ...

class SearchSummary(_message.Message):
    __slots__ = ["files_scanned", "files_skipped", "matches", "truncated"]
    FILES_SCANNED_FIELD_NUMBER: _ClassVar[int]
    FILES_SKIPPED_FIELD_NUMBER: _ClassVar[int]
    MATCHES_FIELD_NUMBER: _ClassVar[int]
    TRUNCATED_FIELD_NUMBER: _ClassVar[int]
    files_scanned: int
    files_skipped: int
    matches: int
    truncated: bool
    def __init__(self, files_scanned: _Optional[int] = ..., matches: _Optional[int] = ..., truncated: bool = ..., files_skipped: _Optional[int] = ...) -> None: ...

class StatRequest(_message.Message):
    __slots__ = ["path"]
    PATH_FIELD_NUMBER: _ClassVar[int]
    path: str
    def __init__(self, path: _Optional[str] = ...) -> None: ...

class StatResponse(_message.Message):
    __slots__ = ["info"]
    INFO_FIELD_NUMBER: _ClassVar[int]
    info: FileInfo
    def __init__(self, info: _Optional[_Union[FileInfo, _Mapping]] = ...) -> None: ...

class WatchFilesOverflow(_message.Message):
    __slots__ = ["reason"]
    REASON_FIELD_NUMBER: _ClassVar[int]
    reason: str
    def __init__(self, reason: _Optional[str] = ...) -> None: ...

class WatchFilesReady(_message.Message):
    __slots__ = ["directories", "path"]
    DIRECTORIES_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    directories: int
    path: str
    def __init__(self, path: _Optional[str] = ..., directories: _Optional[int] = ...) -> None: ...

class WatchFilesRequest(_message.Message):
    __slots__ = ["coalesce", "hidden", "no_ignore", "path"]
    COALESCE_FIELD_NUMBER: _ClassVar[int]
    HIDDEN_FIELD_NUMBER: _ClassVar[int]
    NO_IGNORE_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    coalesce: _duration_pb2.Duration
    hidden: bool
    no_ignore: bool
    path: str
    def __init__(self, path: _Optional[str] = ..., hidden: bool = ..., no_ignore: bool = ..., coalesce: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class WatchFilesResponse(_message.Message):
    __slots__ = ["batch", "overflow", "ready"]
    BATCH_FIELD_NUMBER: _ClassVar[int]
    OVERFLOW_FIELD_NUMBER: _ClassVar[int]
    READY_FIELD_NUMBER: _ClassVar[int]
    batch: FileEventBatch
    overflow: WatchFilesOverflow
    ready: WatchFilesReady
    def __init__(self, ready: _Optional[_Union[WatchFilesReady, _Mapping]] = ..., batch: _Optional[_Union[FileEventBatch, _Mapping]] = ..., overflow: _Optional[_Union[WatchFilesOverflow, _Mapping]] = ...) -> None: ...

class WriteHeader(_message.Message):
    __slots__ = ["append", "create_parents", "expected_sha256", "mode", "path"]
    APPEND_FIELD_NUMBER: _ClassVar[int]
    CREATE_PARENTS_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_SHA256_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    append: bool
    create_parents: bool
    expected_sha256: str
    mode: int
    path: str
    def __init__(self, path: _Optional[str] = ..., mode: _Optional[int] = ..., create_parents: bool = ..., append: bool = ..., expected_sha256: _Optional[str] = ...) -> None: ...

class WriteRequest(_message.Message):
    __slots__ = ["data", "header"]
    DATA_FIELD_NUMBER: _ClassVar[int]
    HEADER_FIELD_NUMBER: _ClassVar[int]
    data: bytes
    header: WriteHeader
    def __init__(self, header: _Optional[_Union[WriteHeader, _Mapping]] = ..., data: _Optional[bytes] = ...) -> None: ...

class WriteResponse(_message.Message):
    __slots__ = ["created", "path", "sha256", "size"]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    SHA256_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    created: bool
    path: str
    sha256: str
    size: int
    def __init__(self, path: _Optional[str] = ..., size: _Optional[int] = ..., sha256: _Optional[str] = ..., created: bool = ...) -> None: ...

class FileType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class FileEventKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []
