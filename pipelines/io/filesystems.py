"""Files by path: local paths directly, every other scheme (``gs://``, ...) through Apache Beam.

:class:`FileSystems` has the methods of Beam's ``apache_beam.io.filesystems.FileSystems`` that
costlib calls, with the same meaning. A path without a scheme is a local file and is served
with :mod:`os` and :mod:`shutil`, so the commands that only read or move a run's files
(``costlib status``, ``publish``, ``unlock``) never import Beam (about a CPU-second); a path with
a scheme, or a local path Beam would decompress by its extension, goes to Beam.

Local semantics follow Beam's ``LocalFileSystem``: ``create`` makes the parent directories;
``delete`` removes a directory with its contents and fails on a missing path; ``match`` lists
the files below the pattern's literal prefix and keeps those whose whole path matches, where
``*`` and ``?`` do not cross ``/`` and ``**`` does (a pattern without a glob character matches
itself, file or directory, when it exists). Failures are :class:`OSError` (Beam's
``BeamIOError`` is one too).
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import IO, Any

__all__ = ["FileMetadata", "FileSystems", "MatchResult", "is_local"]

_SCHEME = re.compile(r"^[a-zA-Z][-a-zA-Z0-9+.]*://")
#: Extensions Beam's default (``AUTO``) compression reads and writes through a codec.
_COMPRESSED = (".bz2", ".deflate", ".gz", ".zst", ".zstd", ".lzma", ".xz", ".snappy")
_GLOB_START = re.compile(r"^[^[*?]*")


def is_local(path: str) -> bool:
    """Whether ``path`` names a local file (no ``scheme://``)."""
    return _SCHEME.match(path) is None


def _beam() -> Any:
    from apache_beam.io.filesystems import FileSystems as BeamFileSystems

    return BeamFileSystems


def _direct(path: str, compression_type: str | None = None) -> bool:
    return is_local(path) and (compression_type == "uncompressed"
                               or not path.endswith(_COMPRESSED))


@dataclass(frozen=True)
class FileMetadata:
    """One matched file, as Beam's ``FileMetadata`` describes it."""

    path: str
    size_in_bytes: int
    last_updated_in_seconds: float = 0.0


@dataclass(frozen=True)
class MatchResult:
    """The files one pattern matched."""

    pattern: str
    metadata_list: list[FileMetadata] = field(default_factory=list)


def _pattern_regex(pattern: str) -> re.Pattern[str]:
    """``*`` and ``?`` within one path segment, ``**`` across segments, ``[...]`` a class."""
    out, i, n = "", 0, len(pattern)
    while i < n:
        c = pattern[i]
        i += 1
        if c == "*":
            if i < n and pattern[i] == "*":
                out += ".*"
                i += 1
            else:
                out += r"[^/\\]*"
        elif c == "?":
            out += "."
        elif c == "[":
            j = i + (i < n and pattern[i] == "!")
            j += j < n and pattern[j] == "]"
            while j < n and pattern[j] != "]":
                j += 1
            if j >= n:
                out += r"\["
            else:
                body = pattern[i:j].replace("\\", "\\\\")
                i = j + 1
                out += "[" + ("^" + body[1:] if body.startswith("!") else body) + "]"
        else:
            out += re.escape(c)
    return re.compile(out + r"\Z", re.DOTALL)


def _metadata(path: str) -> FileMetadata | None:
    try:
        return FileMetadata(path, os.path.getsize(path), os.path.getmtime(path))
    except OSError:  # gone while listing
        return None


def _local_files(root: str) -> Iterator[FileMetadata]:
    for directory, _, names in os.walk(root):
        for name in names:
            found = _metadata(os.path.join(directory, name))
            if found is not None:
                yield found


def _match_local(pattern: str) -> MatchResult:
    if pattern.endswith(("/", "\\")):
        pattern += "*"
    prefix = _GLOB_START.match(pattern)
    literal = prefix.group(0) if prefix else ""
    if literal == pattern:
        found = _metadata(pattern) if os.path.exists(pattern) else None
        return MatchResult(pattern, [] if found is None else [found])
    root = literal if literal.endswith(("/", "\\")) else os.path.dirname(literal)
    if not os.path.exists(root or "."):
        return MatchResult(pattern, [])
    regex = _pattern_regex(pattern)
    return MatchResult(pattern, [m for m in _local_files(root or ".")
                                 if regex.match(m.path)])


class FileSystems:
    """The subset of Beam's ``FileSystems`` costlib uses (see the module docstring)."""

    @staticmethod
    def exists(path: str) -> bool:
        if is_local(path):
            return os.path.exists(path)
        return bool(_beam().exists(path))

    @staticmethod
    def open(path: str, compression_type: str | None = None) -> IO[bytes]:
        if _direct(path, compression_type):
            return open(path, "rb")
        if compression_type is None:
            return _beam().open(path)  # type: ignore[no-any-return]
        return _beam().open(path, compression_type=compression_type)  # type: ignore[no-any-return]

    @staticmethod
    def create(path: str) -> IO[bytes]:
        if _direct(path):
            parent = os.path.dirname(path)
            if parent:
                os.makedirs(parent, exist_ok=True)
            return open(path, "wb")
        return _beam().create(path)  # type: ignore[no-any-return]

    @staticmethod
    def rename(sources: Sequence[str], destinations: Sequence[str]) -> None:
        if not all(is_local(p) for p in (*sources, *destinations)):
            _beam().rename(list(sources), list(destinations))
            return
        for source, destination in zip(sources, destinations, strict=True):
            os.rename(source, destination)

    @staticmethod
    def delete(paths: Sequence[str]) -> None:
        if not all(is_local(p) for p in paths):
            _beam().delete(list(paths))
            return
        for path in paths:
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path)
            else:
                os.remove(path)

    @staticmethod
    def match(patterns: Sequence[str]) -> list[MatchResult]:
        if not all(is_local(p) for p in patterns):
            return list(_beam().match(list(patterns)))
        return [_match_local(p) for p in patterns]
