"""warren: sandboxes for AI-agent rollouts. ``AsyncClient`` first, ``Client`` its sync twin."""
from __future__ import annotations

from .admin import KeyView
from .client import AsyncClient
from .errors import (BackendUnavailableError, BadSpecError, ConnectionClosedError, ForbiddenError, FrameTooLargeError,
                     InternalError, InvalidArgumentError, NoCapacityError, NotFoundError, OverloadedError, ProtocolError,
                     ProtocolVersionError, QuotaError, SandboxGoneError, SandboxPausedError, UnauthenticatedError,
                     UnsupportedError, WarrenError, WarrenTimeoutError)
from .exec import Chunk, CommandResult, ExecResult
from .files import FileInfo, FileStat, SandboxFiles, WriteInfo
from .link import LinkDefaults
from .process import Process
from .replay import OutputOutcome, ReplayResult, RestoreResult, StepOutcome
from .sandbox import Sandbox, SandboxRef
from .session import ShellSession
from .snapshots import ForkItem, ForkResult
from .sync import Client, SyncProcess, SyncSandbox, SyncSession
from .trajectory import (EgressStep, ExecStep, MkdirStep, OtherStep, PauseStep, RecordedBytes, RemoveStep, RenameStep,
                         ResumeStep, SnapshotStep, Step, SymlinkStep, TrajectoryHeader, TrajectoryPage, UploadStep, WriteStep)
from .views import KillOutcome, SandboxView, SnapshotView

__version__ = "0.1.0"

__all__ = [
    "AsyncClient", "Client", "Sandbox", "SyncSandbox", "SandboxRef", "Process", "SyncProcess", "ShellSession",
    "SyncSession", "SandboxFiles", "Chunk", "CommandResult", "ExecResult", "FileInfo", "FileStat", "WriteInfo",
    "KillOutcome", "SandboxView", "SnapshotView", "ForkItem", "ForkResult", "WarrenError", "UnauthenticatedError",
    "ProtocolVersionError", "ForbiddenError", "InvalidArgumentError", "BadSpecError", "NotFoundError", "QuotaError",
    "NoCapacityError", "UnsupportedError", "SandboxGoneError", "SandboxPausedError", "OverloadedError",
    "WarrenTimeoutError", "BackendUnavailableError", "FrameTooLargeError", "ProtocolError", "ConnectionClosedError",
    "InternalError", "TrajectoryPage", "TrajectoryHeader", "RecordedBytes", "Step", "ExecStep", "WriteStep", "UploadStep",
    "RemoveStep", "RenameStep", "MkdirStep", "SymlinkStep", "SnapshotStep", "PauseStep", "ResumeStep", "EgressStep",
    "OtherStep", "ReplayResult", "RestoreResult", "StepOutcome", "OutputOutcome", "KeyView", "LinkDefaults",
]
