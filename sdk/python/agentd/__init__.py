"""agentd: run commands, edit files, run Python and take snapshots on a
paired machine or in a sandbox, through an agenthub.

    import os, agentd
    hub = agentd.Hub("https://hub.example.com", token=os.environ["AGENTD_TOKEN"])
    box = hub.sandbox(env="builtin", conversation="c-42")   # or hub.machine("m-…")
    for ev in box.exec(["pytest", "-q"], timeout=600):       # output events, then the exit
        print(ev.text, end="")

:mod:`agentd.aio` has the same API for asyncio. The generated gRPC stubs
of the ``agentd.v1`` proto package are :mod:`agentd.v1`.
"""

from agentd._client import Files, Hub, Process, Snapshots, Target, connect
from agentd._common import (
    EXIT_TIMEOUT,
    AgentdError,
    AlreadyExists,
    Cancelled,
    DeadlineExceeded,
    Event,
    Exit,
    FailedPrecondition,
    Gap,
    InvalidArgument,
    NotFound,
    Output,
    PermissionDenied,
    PythonRun,
    ResourceExhausted,
    Result,
    SearchResult,
    Unauthenticated,
    Unavailable,
)

__version__ = "0.1.0"

__all__ = [
    "EXIT_TIMEOUT",
    "AgentdError",
    "AlreadyExists",
    "Cancelled",
    "DeadlineExceeded",
    "Event",
    "Exit",
    "FailedPrecondition",
    "Files",
    "Gap",
    "Hub",
    "InvalidArgument",
    "NotFound",
    "Output",
    "PermissionDenied",
    "Process",
    "PythonRun",
    "ResourceExhausted",
    "Result",
    "SearchResult",
    "Snapshots",
    "Target",
    "Unauthenticated",
    "Unavailable",
    "connect",
]
