"""The language server behind ``interlace server`` (``_server``), on pygls and lsprotocol.

The subset of LSP 3.17 that a linter needs, over standard input and output. pygls reads and
writes the framed JSON-RPC messages, dispatches them to the handlers registered here and matches
the client's responses to the server's requests; lsprotocol names the methods and constants.
The handlers take the params as JSON and check them themselves, so that an invalid one is
answered with the field that is wrong (pygls alone answers nothing to a request whose params do
not fit lsprotocol's classes), and they keep the lifecycle pygls's plain JSON-RPC server does not
(``ServerNotInitialized`` before ``initialize``, ``InvalidRequest`` after ``shutdown``). The
server keeps the
text of each open document (full and incremental sync), lints it as ``interlace lint
--stdin-filename PATH --force-exclude`` would (:func:`~interlace.linters._run.lint_stdin`: the
closest ``pyproject.toml``, ``per-file-ignores``, exclusions), publishes the findings as
diagnostics (pushed with ``publishDiagnostics``, or pulled with ``textDocument/diagnostic``
by a client that says it can), and offers code actions: remove an unused ``# noqa`` directive
(IL001's fix),
disable a rule for a line (``--add-noqa``'s edit) and fix the whole document
(``source.fixAll.interlace``).

A Jupyter notebook's cells arrive together (``notebookDocument/*``, LSP 3.17's notebook
synchronisation): its Python cells are linted as one ``.ipynb`` (``_notebook``), and each cell's
text document gets the findings in its own rows.

A daemon thread reads standard input for pygls (:class:`_Input`); the documents are linted once
every message already received is handled, so a burst of ``didChange`` notifications is linted
once, at its last version. Standard output carries the protocol and nothing else: logs go to stderr
and to ``window/logMessage``, and nothing a client sends ends the server but ``exit`` or the end
of its input.

Positions: rows and columns of findings are 1-based and count code points; LSP positions are
0-based lines and character offsets in the negotiated encoding (UTF-16 code units unless the
client offers UTF-32 or UTF-8). Lines end as the engine ends them (``LINE_BREAK``: ``\\r\\n``,
``\\r``, ``\\n``), which is also what LSP specifies.
"""

from __future__ import annotations

import asyncio
import hashlib
import io
import json
import logging
import os
import queue
import re
import sys
import threading
import tokenize
import traceback
import urllib.parse
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import IO, Any, TextIO, TypeVar

import libcst as cst
from libcst.metadata import MetadataWrapper
from lsprotocol import types as lsp
from pygls.exceptions import (
    JsonRpcException,
    JsonRpcInternalError,
    JsonRpcInvalidParams,
    JsonRpcInvalidRequest,
    JsonRpcMethodNotFound,
    JsonRpcServerNotInitialized,
)
from pygls.protocol import JsonRPCProtocol, default_converter
from pygls.protocol.json_rpc import (
    JsonRPCNotification,
    JsonRPCRequestMessage,
    JsonRPCResponseMessage,
)
from pygls.server import JsonRPCServer

from interlace.errors import ConfigError
from interlace.linters._engine import LINE_BREAK, FileError, Finding, RelatedLocation

# ``--add-noqa``'s own placement of a directive, which the "Disable ... for this line" action
# must match.
from interlace.linters._noqa import (
    UNUSED_NOQA,
    UNUSED_NOQA_FIX,
    LineFacts,
    fix_unused_noqa,
    why_no_directive,
    with_directive,
)
from interlace.linters._notebook import is_notebook
from interlace.linters._output import ERROR_NAMES

__all__ = (
    "FIX_ALL",
    "QUICKFIX",
    "SOURCE",
    "UTF8",
    "UTF16",
    "UTF32",
    "InvalidParamsError",
    "Server",
    "apply_change",
    "decode_column",
    "encode_column",
    "serve_stdio",
    "text_offset",
)

UTF8 = lsp.PositionEncodingKind.Utf8.value
UTF16 = lsp.PositionEncodingKind.Utf16.value
UTF32 = lsp.PositionEncodingKind.Utf32.value

FIX_ALL = f"{lsp.CodeActionKind.SourceFixAll.value}.interlace"
"""The kind of the action that applies every fix of a document (editors run it on save)."""
QUICKFIX = lsp.CodeActionKind.QuickFix.value
"""The kind of the actions that fix or suppress one diagnostic."""

SOURCE = "interlace"
"""The ``source`` of every diagnostic."""

_ERROR, _WARNING = lsp.DiagnosticSeverity.Error.value, lsp.DiagnosticSeverity.Warning.value
_LOG_ERROR, _LOG_WARNING, _LOG_INFO = (
    lsp.MessageType.Error.value,
    lsp.MessageType.Warning.value,
    lsp.MessageType.Info.value,
)
_UNNECESSARY = lsp.DiagnosticTag.Unnecessary.value
"""Clients fade the text (an unused directive)."""

_CONFIG_FILES = frozenset({"pyproject.toml", ".gitignore"})
"""What decides a document's settings (its configuration, and with ``force-exclude`` whether
git ignores it): a change to one re-lints every open document."""

_PYTHON_SUFFIXES = (".py", ".pyi")
_CODE_CELL = lsp.NotebookCellKind.Code.value
_UNTITLED_NOTEBOOK = "untitled.ipynb"
"""The name an unsaved notebook is linted under (its settings are the workspace's)."""

_T = TypeVar("_T")


# Positions ----------------------------------------------------------------------------------


def encode_column(line: str, column: int, encoding: str) -> int:
    """Return the LSP character offset of the code point ``column`` (0-based) of ``line``.

    Args:
        line: the line's text, without its line break.
        column: a code point index, clamped to the line.
        encoding: the negotiated position encoding (``UTF8``, ``UTF16`` or ``UTF32``).
    """
    column = min(max(column, 0), len(line))
    if encoding == UTF32 or line.isascii():
        return column
    head = line[:column]
    if encoding == UTF8:
        return len(head.encode("utf-8", "surrogatepass"))
    return column + sum(1 for char in head if ord(char) > 0xFFFF)


def decode_column(line: str, character: int, encoding: str) -> int:
    """Return the code point index (0-based) of the LSP character offset ``character`` in
    ``line``.

    An offset past the end of the line is its end (the specification's rule); one inside a
    character (between the two halves of a UTF-16 surrogate pair, within a UTF-8 sequence)
    is that character's start.
    """
    if character <= 0:
        return 0
    if encoding == UTF32 or line.isascii():
        return min(character, len(line))
    units = 0
    for index, char in enumerate(line):
        if encoding == UTF8:
            units += len(char.encode("utf-8", "surrogatepass"))
        else:
            units += 2 if ord(char) > 0xFFFF else 1
        if units > character:
            return index
        if units == character:
            return index + 1
    return len(line)


def text_offset(text: str, position: Mapping[str, Any], encoding: str) -> int:
    """Return the index in ``text`` of an LSP ``Position`` (``{"line", "character"}``).

    A line past the last is the end of the text; a character past the end of its line is the
    end of the line (before its line break).
    """
    line, character = _integer(position, "line"), _integer(position, "character")
    start = 0
    for _ in range(max(line, 0)):
        found = LINE_BREAK.search(text, start)
        if found is None:
            return len(text)
        start = found.end()
    found = LINE_BREAK.search(text, start)
    end = len(text) if found is None else found.start()
    return start + decode_column(text[start:end], character, encoding)


def apply_change(text: str, change: Mapping[str, Any], encoding: str) -> str:
    """Return ``text`` with one ``TextDocumentContentChangeEvent`` applied: ``{"range",
    "text"}`` replaces that range, ``{"text"}`` alone the whole document.

    Raises:
        InvalidParamsError: the change is not one of those shapes.
    """
    new_text = _field(change, "text", str)
    if change.get("range") is None:
        return new_text
    where = _field(change, "range", dict)
    start = text_offset(text, _field(where, "start", dict), encoding)
    end = text_offset(text, _field(where, "end", dict), encoding)
    start, end = min(start, end), max(start, end)
    return text[:start] + new_text + text[end:]


def _position(lines: Sequence[str], row: int, column: int, encoding: str) -> dict[str, int]:
    """The LSP position of the 1-based ``row`` and code point ``column`` of a finding, clamped
    to the document (a row past the last is the end of the document)."""
    if row < 1:
        return {"line": 0, "character": 0}
    if row > len(lines):
        last = lines[-1]
        return {"line": len(lines) - 1, "character": encode_column(last, len(last), encoding)}
    line = lines[row - 1]
    return {"line": row - 1, "character": encode_column(line, column - 1, encoding)}


def _range(
    lines: Sequence[str], row: int, column: int, end_row: int, end_column: int, encoding: str
) -> dict[str, dict[str, int]]:
    return {
        "start": _position(lines, row, column, encoding),
        "end": _position(lines, end_row, end_column, encoding),
    }


def _common_prefix(a: str, b: str) -> int:
    return next(
        (i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b))
    )


def _line_edit(row: int, old: str, new: str, encoding: str) -> dict[str, Any]:
    """The smallest ``TextEdit`` that turns line ``row`` (0-based) from ``old`` into ``new``."""
    prefix = _common_prefix(old, new)
    suffix = _common_prefix(old[prefix:][::-1], new[prefix:][::-1])
    return {
        "range": {
            "start": {"line": row, "character": encode_column(old, prefix, encoding)},
            "end": {"line": row, "character": encode_column(old, len(old) - suffix, encoding)},
        },
        "newText": new[prefix : len(new) - suffix],
    }


def _with_breaks(text: str) -> list[str]:
    """``text``'s lines, each with its line break (the last one may have none, or be empty)."""
    parts = re.split(f"({LINE_BREAK.pattern})", text)
    return [
        parts[i] + (parts[i + 1] if i + 1 < len(parts) else "") for i in range(0, len(parts), 2)
    ]


def _text_edit(old: str, new: str, encoding: str) -> dict[str, Any]:
    """One ``TextEdit`` that turns ``old`` into ``new``: it replaces whole lines, from the first
    that differs to the last, so that no edit ends between a ``\\r`` and its ``\\n``."""
    before, after = _with_breaks(old), _with_breaks(new)
    top = 0
    while top < min(len(before), len(after)) and before[top] == after[top]:
        top += 1
    bottom = 0
    while (
        bottom < min(len(before), len(after)) - top
        and before[len(before) - 1 - bottom] == after[len(after) - 1 - bottom]
    ):
        bottom += 1
    end_line = len(before) - bottom
    if end_line < len(before):
        end = {"line": end_line, "character": 0}
    else:  # the last line changed: the end of the document
        last = LINE_BREAK.split(old)[-1]
        end = {"line": len(before) - 1, "character": encode_column(last, len(last), encoding)}
    return {
        "range": {"start": {"line": top, "character": 0}, "end": end},
        "newText": "".join(after[top : len(after) - bottom]),
    }


# Messages -----------------------------------------------------------------------------------


class InvalidParamsError(ValueError):
    """A message's parameters are not what the method takes (``InvalidParams``)."""


def _field(obj: object, key: str, kind: type[_T]) -> _T:
    value = obj.get(key) if isinstance(obj, dict) else None
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise InvalidParamsError(f"expected {key!r} to be a {kind.__name__}, got {value!r}")
    return value


def _integer(obj: object, key: str) -> int:
    return _field(obj, key, int)


def _uri_of(params: object) -> str:
    return _field(_field(params, "textDocument", dict), "uri", str)


def _cell(cell: object) -> tuple[str, int]:
    """A ``NotebookCell``'s text document URI and kind."""
    return _field(cell, "document", str), _integer(cell, "kind")


# Documents ----------------------------------------------------------------------------------


def _path_of(uri: str) -> str | None:
    """The file a ``file:`` URI names; ``None`` for any other scheme (``untitled:``)."""
    parts = urllib.parse.urlsplit(uri)
    if parts.scheme != "file":
        return None
    path = urllib.parse.unquote(parts.path)
    if os.name == "nt":
        if re.match(r"/[A-Za-z]:", path):
            path = path[1:]  # file:///c%3A/src/a.py
        path = path.replace("/", "\\")
    if parts.netloc and parts.netloc != "localhost":
        path = f"//{parts.netloc}{path}" if os.name != "nt" else f"\\\\{parts.netloc}{path}"
    return path


def _source_bytes(text: str) -> tuple[bytes, str]:
    """The bytes the linter reads for ``text``, and the codec that made them: the one its
    coding cookie names, else (or when that codec cannot encode it) UTF-8."""
    data = text.encode("utf-8", "surrogatepass")
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError:
        return data, "utf-8"
    if encoding in ("utf-8", "utf-8-sig"):
        return data, "utf-8"
    try:
        return text.encode(encoding), encoding
    except (UnicodeError, LookupError):
        return data, "utf-8"


def _decoded(data: bytes, encoding: str) -> str:
    return data.decode(encoding, "surrogatepass" if encoding == "utf-8" else "strict")


@dataclass
class _Lint:
    """One lint of one version of a document, and the diagnostics published for it.

    Invariant: ``lines`` are the document's lines at ``version`` (``LINE_BREAK``), which every
    row of ``findings`` and ``errors`` refers to.
    """

    version: int
    text: str
    data: bytes
    encoding: str
    lines: list[str]
    findings: tuple[Finding, ...] = ()
    errors: tuple[FileError, ...] = ()
    diagnostics: list[dict[str, Any]] = field(default_factory=list)
    code: bytes | None = None
    """What the linter parsed, when it is not ``data``: a notebook cell's code with IPython's
    escapes as ``pass`` (``None`` for a cell that is not linted)."""
    _facts: LineFacts | None = None
    _parsed: bool = False

    def line_facts(self) -> LineFacts | None:
        """``_noqa``'s facts about the lines (comments, strings), which ``--add-noqa`` reads to
        place a directive; parsed once, when a code action first needs them (``None`` when
        the text does not parse)."""
        if not self._parsed:
            self._parsed = True
            facts = LineFacts()
            code = self.data if self.code is None else self.code
            try:
                MetadataWrapper(cst.parse_module(code), unsafe_skip_copy=True).visit(facts)
            except Exception:  # libcst rejects the text (the findings are errors then)
                return None
            self._facts = facts
        return self._facts


@dataclass
class _Document:
    """An open document.

    Invariant: ``lint`` is ``None`` or the lint of ``text`` at ``version`` unless ``dirty``.
    """

    uri: str
    language_id: str
    version: int
    text: str
    path: str | None
    dirty: bool = True
    lint: _Lint | None = None
    notebook: str | None = None
    """The URI of the notebook this document is a cell of, or ``None``."""

    @property
    def lintable(self) -> bool:
        """Python, by its language or by its file name. A notebook file's JSON is not: the
        client sends a notebook's cells (``notebookDocument/*``), which are linted together."""
        if self.path is not None and is_notebook(self.path):
            return False
        return self.language_id == "python" or (
            self.path is not None and self.path.endswith(_PYTHON_SUFFIXES)
        )


@dataclass
class _Notebook:
    """An open notebook: its cells in order, each the URI of its text document and its
    ``NotebookCellKind`` (1 markup, 2 code)."""

    uri: str
    path: str | None
    version: int
    cells: list[tuple[str, int]]
    dirty: bool = True

    def source(self, documents: Mapping[str, _Document]) -> bytes:
        """The notebook as a ``.ipynb`` file that the linter reads as the editor shows it: its
        Python code cells with their text, every other cell an empty one, so that the cells
        keep their numbers."""
        cells = []
        for uri, kind in self.cells:
            document = documents.get(uri)
            if kind == _CODE_CELL and document is not None and document.language_id == "python":
                cells.append(
                    {"cell_type": "code", "metadata": {}, "outputs": [], "source": document.text}
                )
            else:
                cells.append({"cell_type": "markdown", "metadata": {}, "source": ""})
        notebook = {"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
        return json.dumps(notebook).encode("utf-8", "surrogatepass")


def _kind_wanted(kind: str, only: Sequence[str] | None) -> bool:
    """Whether ``context.only`` asks for actions of ``kind`` (kinds are hierarchical: ``source``
    covers ``source.fixAll.interlace``)."""
    return only is None or any(kind == o or kind.startswith(o + ".") for o in only)


# The server ---------------------------------------------------------------------------------


class _Input:
    """Standard input as pygls reads it (``readline``, ``read``), filled by a daemon thread of
    its own, so that ``exit`` can end the input while the client keeps its end open: pygls
    reads in a pool thread that the interpreter waits for at exit.

    Invariant: only pygls's reading thread calls ``readline`` and ``read``; the daemon reads
    the file descriptor unbuffered, so it holds no buffer lock that the interpreter's
    shutdown would wait for.
    """

    def __init__(self, stream: IO[bytes]) -> None:
        self._chunks: queue.Queue[bytes] = queue.Queue()
        self._buffer = bytearray()
        self._ended = False
        self._closed = threading.Event()
        threading.Thread(
            target=self._pump, args=(stream,), name="interlace-lsp-reader", daemon=True
        ).start()

    def _pump(self, stream: IO[bytes]) -> None:
        try:
            descriptor = stream.fileno()
        except (OSError, ValueError, AttributeError):  # an embedding replaced sys.stdin
            descriptor = None
        while True:
            try:
                chunk = os.read(descriptor, 65536) if descriptor is not None else stream.read(65536)
            except (OSError, ValueError):
                chunk = b""
            self._chunks.put(chunk)
            if not chunk:
                return

    def pending(self) -> bool:
        """Whether input has arrived that pygls has not read yet (a message on its way)."""
        return bool(self._buffer) or not self._chunks.empty()

    def close(self) -> None:
        """End the input: what is still unread is never read."""
        self._closed.set()
        self._chunks.put(b"")

    def _fill(self) -> bool:
        if self._ended or self._closed.is_set():
            return False
        chunk = self._chunks.get()
        if not chunk or self._closed.is_set():
            self._ended = True
            return False
        self._buffer += chunk
        return True

    def readline(self) -> bytes:
        """The next line, with its ``\\n``; less at the end of input, ``b""`` after it."""
        while (end := self._buffer.find(b"\n")) < 0 and self._fill():
            pass
        if self._closed.is_set():
            return b""
        size = len(self._buffer) if end < 0 else end + 1
        line = bytes(self._buffer[:size])
        del self._buffer[:size]
        return line

    def read(self, size: int) -> bytes:
        """The next ``size`` bytes; fewer at the end of input."""
        while len(self._buffer) < size and self._fill():
            pass
        if self._closed.is_set():
            return b""
        data = bytes(self._buffer[:size])
        del self._buffer[:size]
        return data


class _Protocol(JsonRPCProtocol):
    """pygls's JSON-RPC protocol with every message's params left as JSON: the handlers check
    them, so that an error names the field that is wrong (``_field``).

    pygls structures a message of a known LSP method into lsprotocol's classes, and answers
    nothing to a request whose params do not fit them; the plain JSON-RPC protocol it builds
    on knows no method, so its messages keep their params as they came.
    """

    def structure_message(self, data: dict[str, Any]) -> Any:
        # The generic messages, built here with their params (or result) as plain JSON: pygls's
        # converter would turn every object in them into a named tuple. A request or
        # notification may leave out ``params`` (``shutdown``, ``exit``).
        if "jsonrpc" not in data or "error" in data:
            return super().structure_message(data)
        jsonrpc = data["jsonrpc"]
        if "method" in data:
            method, params = data["method"], data.get("params")
            if "id" in data:
                return JsonRPCRequestMessage(data["id"], method, jsonrpc, params)
            return JsonRPCNotification(method, jsonrpc, params)
        if "id" in data:
            return JsonRPCResponseMessage(data["id"], jsonrpc, data.get("result"))
        return data

    def handle_message(self, message: Any) -> None:
        server = self._server
        assert isinstance(server, _LanguageServer)
        if isinstance(message, dict):  # an object with no "jsonrpc" member
            server.linter.malformed(f"a message that is not JSON-RPC: {message!r}")
            return
        if not hasattr(message, "jsonrpc"):
            server.linter.malformed(f"a message that is not a JSON object: {message!r}")
            return
        super().handle_message(message)

    def _get_handler(self, feature_name: str) -> Any:
        try:
            return super()._get_handler(feature_name)
        except JsonRpcMethodNotFound:
            raise JsonRpcMethodNotFound(f"unknown method {feature_name!r}") from None


class _LanguageServer(JsonRPCServer):
    """The pygls server that carries :class:`Server`'s handlers: pygls reads and writes the
    framed messages, dispatches them, and matches the client's responses to our requests."""

    def __init__(self, linter: Server) -> None:
        super().__init__(_Protocol, default_converter)
        self.linter = linter

    def report_server_error(self, error: Exception, source: Any) -> None:
        # What reaches here is input pygls could not read (not JSON, or not a message); a
        # handler's failure is logged by the handler's wrapper, with its traceback.
        if isinstance(error, ValueError | RecursionError):
            self.linter.malformed(f"a message that is not JSON ({error})")
        elif not isinstance(error, JsonRpcException):
            self.linter.malformed(f"a message pygls could not handle ({error!r})")


class Server:
    """The linter's side of the protocol: it keeps the open documents and answers each method
    (the handlers take the params as JSON), while pygls (:class:`_LanguageServer`) frames,
    reads, writes and dispatches the messages.

    Invariant: every handler runs on the thread of pygls's event loop; ``exit_code`` is
    ``None`` until ``exit`` or the end of input.
    """

    def __init__(self, *, log: TextIO | None = None) -> None:
        self._log_stream = log if log is not None else sys.stderr
        self._documents: dict[str, _Document] = {}
        self._notebooks: dict[str, _Notebook] = {}
        self._encoding = UTF16
        self._capabilities: dict[str, Any] = {}
        self._initialized = False
        self._pull = False
        """The client pulls diagnostics (``textDocument/diagnostic``): none are pushed."""
        self._shutdown = False
        self._shown: set[str] = set()
        self._input: _Input | None = None
        self.exit_code: int | None = None
        self.server = _LanguageServer(self)
        requests: dict[str, Callable[[Any], Any]] = {
            lsp.INITIALIZE: self._initialize,
            lsp.SHUTDOWN: self._shutdown_request,
            lsp.TEXT_DOCUMENT_CODE_ACTION: self._code_action,
            lsp.TEXT_DOCUMENT_DIAGNOSTIC: self._pull_diagnostics,
        }
        notifications: dict[str, Callable[[Any], None]] = {
            lsp.INITIALIZED: self._on_initialized,
            lsp.TEXT_DOCUMENT_DID_OPEN: self._did_open,
            lsp.TEXT_DOCUMENT_DID_CHANGE: self._did_change,
            lsp.TEXT_DOCUMENT_DID_SAVE: self._did_save,
            lsp.TEXT_DOCUMENT_DID_CLOSE: self._did_close,
            lsp.WORKSPACE_DID_CHANGE_WATCHED_FILES: self._did_change_watched_files,
            lsp.NOTEBOOK_DOCUMENT_DID_OPEN: self._notebook_did_open,
            lsp.NOTEBOOK_DOCUMENT_DID_CHANGE: self._notebook_did_change,
            lsp.NOTEBOOK_DOCUMENT_DID_SAVE: self._notebook_did_save,
            lsp.NOTEBOOK_DOCUMENT_DID_CLOSE: self._notebook_did_close,
        }
        features = self.server.protocol.fm
        for method, handler in requests.items():
            features.feature(method)(self._request(method, handler))
        for method, handler in notifications.items():
            features.feature(method)(self._notification(method, handler))

        def exit_(params: Any) -> None:  # pygls marks what it registers: not a bound method
            self._exit(params)

        features.feature(lsp.EXIT)(exit_)
        # pygls logs a notification of a method it has no handler for; the specification
        # says to ignore them (``$/...`` above all), and so does this.
        logging.getLogger("pygls").setLevel(logging.CRITICAL)

    # Driving

    def serve(self, reader: IO[bytes], writer: IO[bytes]) -> int:
        """Serve on ``reader`` and ``writer`` until ``exit`` or the end of input; return the exit
        code (0 after ``shutdown``, else 1, as the specification says)."""
        self._input = _Input(reader)
        self.server.start_io(self._input, writer)  # type: ignore[arg-type]
        if self.exit_code is None:
            self.exit_code = 0 if self._shutdown else 1
        return self.exit_code

    def _request(self, method: str, handler: Callable[[Any], _T]) -> Callable[[Any], _T]:
        def answer(params: Any) -> _T:
            if not self._initialized and method != lsp.INITIALIZE:
                raise JsonRpcServerNotInitialized(f"{method!r} before 'initialize'")
            if self._initialized and method == lsp.INITIALIZE:
                raise JsonRpcInvalidRequest("'initialize' may only be sent once")
            if self._shutdown:
                raise JsonRpcInvalidRequest(f"{method!r} after 'shutdown'")
            try:
                return handler(params)
            except InvalidParamsError as exc:
                raise JsonRpcInvalidParams(f"invalid params for {method!r}: {exc}") from None
            except Exception as exc:
                self._internal(f"{method!r} failed", exc)
                raise JsonRpcInternalError(f"internal error in {method!r}: {exc!r}") from None

        return answer

    def _notification(self, method: str, handler: Callable[[Any], None]) -> Callable[[Any], None]:
        def take(params: Any) -> None:
            if not self._initialized or self._shutdown:
                return  # the specification: any notification before initialize is dropped
            try:
                handler(params)
            except InvalidParamsError as exc:
                self._log(_LOG_ERROR, f"ignored {method!r} with invalid params: {exc}")
            except Exception as exc:
                self._internal(f"{method!r} failed", exc)
            self._settle()

        return take

    def _exit(self, params: Any) -> None:
        self.exit_code = 0 if self._shutdown else 1
        # The client may keep its end open: pygls's loop ends at the end of its input.
        if self._input is not None:
            self._input.close()

    def _settle(self) -> None:
        """Lint what changed once every message already received is handled, so that a burst
        of ``didChange`` notifications is linted once, at its last version."""
        if not self._pull:
            asyncio.get_running_loop().call_soon(self._publish_when_idle)

    def _publish_when_idle(self) -> None:
        if self._input is not None and self._input.pending():
            return  # the next message's handler settles again
        self.publish_changed()

    def publish_changed(self) -> None:
        """Lint each document changed since it was last linted, and publish its diagnostics
        (a client that pulls them asks for each document when it wants it)."""
        if self._pull or self._shutdown:
            return
        for document in list(self._documents.values()):
            if document.dirty and document.notebook is None:
                self._refresh(document)
        for notebook in list(self._notebooks.values()):
            first = next((uri for uri, _ in notebook.cells if uri in self._documents), None)
            if first is not None:
                self._current(self._documents[first])

    def malformed(self, reason: str) -> None:
        """Log input that is not a message; never fatal."""
        self._log(_LOG_ERROR, f"ignored {reason}")

    # Output

    def _notify(self, method: str, params: Any) -> None:
        self.server.protocol.notify(method, params)

    def _ask(self, method: str, params: Any) -> None:
        """Send a request to the client; log its refusal, if it refuses."""

        def answered(future: Future[Any]) -> None:
            error = future.exception()
            if error is not None:
                self._log(_LOG_WARNING, f"the client refused {method!r}: {error!r}")

        self.server.protocol.send_request(method, params, msg_id=None).add_done_callback(answered)

    def _log(self, level: int, message: str) -> None:
        print(f"interlace server: {message}", file=self._log_stream, flush=True)
        self._notify(lsp.WINDOW_LOG_MESSAGE, {"type": level, "message": message})

    def _internal(self, what: str, exc: BaseException) -> None:
        text = "".join(traceback.format_exception(exc))
        self._log(
            _LOG_ERROR,
            f"internal error: {what}; this is a bug in interlace, please report "
            f"it with this traceback:\n{text}",
        )

    def _show_once(self, message: str) -> None:
        """Show ``message`` as an error, once until the configuration changes."""
        if message not in self._shown:
            self._shown.add(message)
            self._notify(lsp.WINDOW_SHOW_MESSAGE, {"type": _LOG_ERROR, "message": message})
            self._log(_LOG_ERROR, message)

    # Lifecycle

    def _initialize(self, params: Any) -> dict[str, Any]:
        capabilities = params.get("capabilities") if isinstance(params, dict) else None
        self._capabilities = capabilities if isinstance(capabilities, dict) else {}
        offered = self._capability("general", "positionEncodings")
        offered = offered if isinstance(offered, list) else [UTF16]
        # UTF-32 counts code points, as the findings do; UTF-8 is next cheapest to convert to.
        self._encoding = next((e for e in (UTF32, UTF8) if e in offered), UTF16)
        self._initialized = True
        if isinstance(params, dict):
            self._enter_workspace(params)
        from interlace import __version__

        self._log(
            _LOG_INFO,
            f"interlace {__version__}: positions in {self._encoding}, working "
            f"directory {os.getcwd()}",
        )

        server: dict[str, Any] = {
            "positionEncoding": self._encoding,
            "textDocumentSync": {
                "openClose": True,
                "change": lsp.TextDocumentSyncKind.Incremental.value,
                "save": True,
            },
            # Any notebook's Python cells, sent together so that they are linted as one module.
            "notebookDocumentSync": {"notebookSelector": [{"cells": [{"language": "python"}]}]},
        }
        if isinstance(self._capability("textDocument", "diagnostic"), dict):
            # A client that can pull diagnostics gets them only that way (never twice).
            self._pull = True
            server["diagnosticProvider"] = {
                "identifier": "interlace",
                "interFileDependencies": False,
                "workspaceDiagnostics": False,
            }
        if self._capability("textDocument", "codeAction", "codeActionLiteralSupport"):
            # CodeActionOptions only for a client that takes CodeAction literals (the spec).
            server["codeActionProvider"] = {
                "codeActionKinds": [QUICKFIX, FIX_ALL],
                "resolveProvider": False,
            }
        return {
            "capabilities": server,
            "serverInfo": {"name": "interlace", "version": __version__},
        }

    def _enter_workspace(self, params: Mapping[str, Any]) -> None:
        """Work in the first workspace folder, as ``interlace lint`` run there would: an
        untitled buffer, and a file with no configuration above it, take its settings."""
        folders = params.get("workspaceFolders")
        uri = params.get("rootUri")
        if isinstance(folders, list) and folders and isinstance(folders[0], dict):
            uri = folders[0].get("uri")
        path = _path_of(uri) if isinstance(uri, str) else None
        if path is None and isinstance(params.get("rootPath"), str):
            path = params["rootPath"]
        if path is not None and os.path.isdir(path):
            os.chdir(path)

    def _capability(self, *keys: str) -> Any:
        value: Any = self._capabilities
        for key in keys:
            value = value.get(key) if isinstance(value, dict) else None
        return value

    def _on_initialized(self, params: Any) -> None:
        if self._capability("workspace", "didChangeWatchedFiles", "dynamicRegistration"):
            watchers = [{"globPattern": f"**/{name}"} for name in sorted(_CONFIG_FILES)]
            registration = {
                "id": "interlace/watch-configuration",
                "method": lsp.WORKSPACE_DID_CHANGE_WATCHED_FILES,
                "registerOptions": {"watchers": watchers},
            }
            self._ask(lsp.CLIENT_REGISTER_CAPABILITY, {"registrations": [registration]})

    def _shutdown_request(self, params: Any) -> None:
        self._shutdown = True

    # Documents

    def _did_open(self, params: Any) -> None:
        self._open(_field(params, "textDocument", dict), notebook=None)

    def _open(self, item: object, *, notebook: str | None) -> None:
        """Open the ``TextDocumentItem`` ``item`` (a cell of ``notebook`` if given)."""
        uri = _field(item, "uri", str)
        self._documents[uri] = _Document(
            uri,
            _field(item, "languageId", str),
            _integer(item, "version"),
            _field(item, "text", str),
            _path_of(uri),
            notebook=notebook,
        )

    def _did_change(self, params: Any) -> None:
        self._change(_field(params, "textDocument", dict), _field(params, "contentChanges", list))

    def _change(self, identifier: object, changes: list[Any]) -> None:
        """Apply ``changes`` to the open document ``identifier`` names, at its new version."""
        uri = _field(identifier, "uri", str)
        document = self._documents.get(uri)
        if document is None:
            raise InvalidParamsError(f"{uri!r} is not open")
        text = document.text
        for change in changes:
            if not isinstance(change, dict):
                raise InvalidParamsError(
                    f"expected each content change to be an object, got {change!r}"
                )
            text = apply_change(text, change, self._encoding)
        document.text = text
        document.version = _integer(identifier, "version")
        document.dirty = True

    def _did_save(self, params: Any) -> None:
        uri = _uri_of(params)
        path = _path_of(uri)
        if path is not None and PurePosixPath(path.replace("\\", "/")).name in _CONFIG_FILES:
            self._configuration_changed()
        document = self._documents.get(uri)
        if document is not None:
            if isinstance(params.get("text"), str):
                document.text = params["text"]
            document.dirty = True  # the file's configuration may have changed on disk

    def _did_close(self, params: Any) -> None:
        self._close(_uri_of(params))

    def _close(self, uri: str) -> None:
        if self._documents.pop(uri, None) is not None and not self._pull:
            self._notify(lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS, {"uri": uri, "diagnostics": []})

    # Notebooks

    def _notebook_of(self, params: Any) -> _Notebook:
        uri = _field(_field(params, "notebookDocument", dict), "uri", str)
        notebook = self._notebooks.get(uri)
        if notebook is None:
            raise InvalidParamsError(f"notebook {uri!r} is not open")
        return notebook

    def _notebook_did_open(self, params: Any) -> None:
        item = _field(params, "notebookDocument", dict)
        uri = _field(item, "uri", str)
        cells = [_cell(cell) for cell in _field(item, "cells", list)]
        self._notebooks[uri] = _Notebook(uri, _path_of(uri), _integer(item, "version"), cells)
        for cell in _field(params, "cellTextDocuments", list):
            self._open(cell, notebook=uri)

    def _notebook_did_change(self, params: Any) -> None:
        notebook = self._notebook_of(params)
        notebook.version = _integer(_field(params, "notebookDocument", dict), "version")
        notebook.dirty = True
        cells = _field(params, "change", dict).get("cells")
        if not isinstance(cells, dict):
            return  # only the notebook's metadata changed
        structure = cells.get("structure")
        if isinstance(structure, dict):
            array = _field(structure, "array", dict)
            start, count = _integer(array, "start"), _integer(array, "deleteCount")
            added = array.get("cells") or []
            if not isinstance(added, list) or not 0 <= start <= len(notebook.cells):
                raise InvalidParamsError(f"invalid cell change {array!r}")
            notebook.cells[start : start + count] = [_cell(cell) for cell in added]
            for item in structure.get("didOpen") or []:
                self._open(item, notebook=notebook.uri)
            for identifier in structure.get("didClose") or []:
                self._close(_field(identifier, "uri", str))
        kinds = {}
        for cell in cells.get("data") or []:  # a cell's kind can change (code to markdown)
            uri, kind = _cell(cell)
            kinds[uri] = kind
        notebook.cells = [(uri, kinds.get(uri, kind)) for uri, kind in notebook.cells]
        for content in cells.get("textContent") or []:
            self._change(_field(content, "document", dict), _field(content, "changes", list))

    def _notebook_did_save(self, params: Any) -> None:
        self._notebook_of(params).dirty = True  # its configuration may have changed on disk

    def _notebook_did_close(self, params: Any) -> None:
        notebook = self._notebooks.pop(self._notebook_of(params).uri)
        closed = [_field(cell, "uri", str) for cell in params.get("cellTextDocuments") or []]
        for uri in dict.fromkeys([*closed, *(uri for uri, _ in notebook.cells)]):
            self._close(uri)

    def _did_change_watched_files(self, params: Any) -> None:
        changes = _field(params, "changes", list)
        for change in changes:
            path = _path_of(_field(change, "uri", str)) or ""
            if PurePosixPath(path.replace("\\", "/")).name in _CONFIG_FILES:
                self._configuration_changed()
                return

    def _configuration_changed(self) -> None:
        self._shown.clear()  # a configuration still broken after an edit is shown again
        for document in self._documents.values():
            document.dirty = True
        for notebook in self._notebooks.values():
            notebook.dirty = True
        if self._pull and self._capability("workspace", "diagnostics", "refreshSupport"):
            self._ask(lsp.WORKSPACE_DIAGNOSTIC_REFRESH, None)

    def _pull_diagnostics(self, params: Any) -> dict[str, Any]:
        """``textDocument/diagnostic``: the document's findings as a full report, or
        ``unchanged`` when they are the ones the client holds (its ``previousResultId``).

        The result id is the findings themselves, hashed: an edit that changes nothing the
        client shows (or a save) costs it no update. A document that is not open has none.
        """
        document = self._documents.get(_uri_of(params))
        if document is None:
            return {"kind": "full", "items": []}
        lint = self._current(document)
        items = lint.diagnostics if lint is not None else []
        digest = hashlib.sha256(json.dumps(items, sort_keys=True).encode("utf-8"))
        result_id = digest.hexdigest()[:16]
        if isinstance(params, dict) and params.get("previousResultId") == result_id:
            return {"kind": "unchanged", "resultId": result_id}
        return {"kind": "full", "resultId": result_id, "items": items}

    # Linting

    def _refresh(self, document: _Document) -> _Lint | None:
        """Lint ``document`` if it is Python and publish its diagnostics (unless the client
        pulls them); return its lint."""
        if document.notebook is not None:
            notebook = self._notebooks.get(document.notebook)
            if notebook is not None:
                self._refresh_notebook(notebook)
            return document.lint
        document.dirty = False
        if not document.lintable:
            document.lint = None
            return None
        document.lint = self._lint(document)
        self._publish(document, document.lint)
        return document.lint

    def _publish(self, document: _Document, lint: _Lint) -> None:
        """Push a document's diagnostics to the client, unless the client pulls them."""
        if self._pull:
            return
        self._notify(
            lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS,
            {"uri": document.uri, "version": document.version, "diagnostics": lint.diagnostics},
        )

    def _lint(self, document: _Document) -> _Lint:
        from interlace.linters._run import lint_stdin

        data, encoding = _source_bytes(document.text)
        lint = _Lint(
            document.version, document.text, data, encoding, LINE_BREAK.split(document.text)
        )
        try:
            result = lint_stdin(data, filename=document.path, force_exclude=True)
        except ConfigError as exc:
            self._show_once(f"interlace: {exc}")
            return lint
        except Exception as exc:  # never let one document take the server down
            self._internal(f"linting {document.uri}", exc)
            return lint
        lint.findings, lint.errors = tuple(result.findings), tuple(result.errors)
        lint.diagnostics = [self._diagnostic(document.uri, lint, f) for f in lint.findings]
        lint.diagnostics.extend(self._error_diagnostic(lint, error) for error in lint.errors)
        return lint

    def _current(self, document: _Document) -> _Lint | None:
        """The lint of ``document`` as it is now: linted again if it (or, for a notebook's
        cell, its notebook or any cell of it) changed since."""
        notebook = self._notebooks.get(document.notebook) if document.notebook else None
        if notebook is None:
            return self._refresh(document) if document.dirty else document.lint
        if notebook.dirty or any(
            self._documents[uri].dirty for uri, _ in notebook.cells if uri in self._documents
        ):
            self._refresh_notebook(notebook)
        return document.lint

    def _refresh_notebook(self, notebook: _Notebook) -> None:
        """Lint a notebook's cells as one module and give each cell its findings, then publish
        each cell's diagnostics (unless the client pulls them)."""
        from interlace.linters._notebook import linted_code
        from interlace.linters._run import lint_stdin

        notebook.dirty = False
        by_number: dict[int, _Document] = {}  # the Python code cells, by their number
        for number, (uri, kind) in enumerate(notebook.cells, start=1):
            document = self._documents.get(uri)
            if document is None:
                continue
            document.dirty, document.lint = False, None
            if kind == _CODE_CELL and document.language_id == "python":
                by_number[number] = document
        for document in by_number.values():
            document.dirty = False
            data = document.text.encode("utf-8", "surrogatepass")
            lines = LINE_BREAK.split(document.text)
            document.lint = _Lint(document.version, document.text, data, "utf-8", lines)
            code = linted_code(document.text)
            document.lint.code = None if code is None else code.encode("utf-8", "surrogatepass")
        try:
            result = lint_stdin(
                notebook.source(self._documents),
                filename=notebook.path or _UNTITLED_NOTEBOOK,
                force_exclude=True,
            )
        except ConfigError as exc:
            self._show_once(f"interlace: {exc}")
            result = None
        except Exception as exc:  # never let one notebook take the server down
            self._internal(f"linting {notebook.uri}", exc)
            result = None

        def where(cell: int | None) -> tuple[str, list[str]] | None:
            document = by_number.get(cell) if cell is not None else None
            if document is None or document.lint is None:
                return None
            return document.uri, document.lint.lines

        for number, document in by_number.items():
            lint = document.lint
            if lint is None or result is None:
                continue
            lint.findings = tuple(f for f in result.findings if f.cell == number)
            lint.errors = tuple(e for e in result.errors if e.cell == number)
            lint.diagnostics = [
                self._diagnostic(document.uri, lint, f, lambda r: where(r.cell))
                for f in lint.findings
            ]
            lint.diagnostics.extend(self._error_diagnostic(lint, e) for e in lint.errors)
        if result is not None and by_number:
            # A notebook-wide error (none is expected of the text the editor holds) goes on
            # its first cell, so that it is seen.
            first = next(iter(by_number.values()))
            assert first.lint is not None
            wide = [e for e in result.errors if e.cell is None]
            first.lint.errors += tuple(wide)
            first.lint.diagnostics.extend(self._error_diagnostic(first.lint, e) for e in wide)
        for document in by_number.values():
            assert document.lint is not None
            self._publish(document, document.lint)

    def _diagnostic(
        self,
        uri: str,
        lint: _Lint,
        finding: Finding,
        where: Callable[[RelatedLocation], tuple[str, list[str]] | None] | None = None,
    ) -> dict[str, Any]:
        """``finding`` as a diagnostic of the document ``uri``. ``where`` gives the document
        and lines of a related location that may be in another document (a notebook's
        cell); by default every one is in ``uri``."""
        lines, encoding = lint.lines, self._encoding
        diagnostic: dict[str, Any] = {
            "range": _range(
                lines, finding.row, finding.column, finding.end_row, finding.end_column, encoding
            ),
            "severity": _WARNING,
            "code": finding.code,
            "source": SOURCE,
            "message": finding.message,
        }
        if finding.code == UNUSED_NOQA:
            diagnostic["tags"] = [_UNNECESSARY]
        related = []
        for r in finding.related:
            at = (uri, lines) if where is None else where(r)
            if at is None:
                continue
            range_ = _range(at[1], r.row, r.column, r.end_row, r.end_column, encoding)
            related.append({"location": {"uri": at[0], "range": range_}, "message": r.message})
        if related:
            diagnostic["relatedInformation"] = related
        return diagnostic

    def _error_diagnostic(self, lint: _Lint, error: FileError) -> dict[str, Any]:
        """A file that could not be linted: one error at its position, a character wide."""
        row, column = max(error.row, 1), max(error.column, 1)
        return {
            "range": _range(lint.lines, row, column, row, column + 1, self._encoding),
            "severity": _ERROR,
            "code": ERROR_NAMES.get(error.kind, f"{error.kind}-error"),
            "source": SOURCE,
            "message": error.message,
        }

    # Code actions

    def _code_action(self, params: Any) -> list[dict[str, Any]]:
        document = self._documents.get(_uri_of(params))
        context = _field(params, "context", dict)
        wanted = _field(context, "diagnostics", list)
        only = context.get("only")
        if only is not None and not isinstance(only, list):
            raise InvalidParamsError(f"expected 'only' to be a list, got {only!r}")
        if document is None:
            return []
        lint = self._current(document)
        if lint is None:
            return []
        actions: list[dict[str, Any]] = []
        if _kind_wanted(QUICKFIX, only):
            seen: set[str] = set()
            for diagnostic in wanted:
                for action in self._quickfixes(document, lint, diagnostic):
                    # Two diagnostics of one code on one line share their actions.
                    key = json.dumps(
                        {k: v for k, v in action.items() if k != "diagnostics"}, sort_keys=True
                    )
                    if key not in seen:
                        seen.add(key)
                        actions.append(action)
        if _kind_wanted(FIX_ALL, only):
            fix_all = self._fix_all(document, lint)
            if fix_all is not None:
                actions.append(fix_all)
        return actions

    def _quickfixes(
        self, document: _Document, lint: _Lint, diagnostic: object
    ) -> Iterable[dict[str, Any]]:
        """The quick fixes of the current findings that ``diagnostic`` (as the client holds it)
        stands for: same code, same range. A diagnostic of an older version matches nothing
        moved since, so it gets no action rather than a wrong one."""
        if not isinstance(diagnostic, dict) or diagnostic.get("source") != SOURCE:
            return
        published_findings = lint.diagnostics[: len(lint.findings)]  # the errors' come after
        for finding, published in zip(lint.findings, published_findings, strict=True):
            if (published["code"], published["range"]) != (
                diagnostic.get("code"),
                diagnostic.get("range"),
            ):
                continue
            if finding.code == UNUSED_NOQA:
                if finding.fix is not None:
                    fix = finding.fix
                    edit = {
                        "range": _range(
                            lint.lines,
                            fix.row,
                            fix.column,
                            fix.end_row,
                            fix.end_column,
                            self._encoding,
                        ),
                        "newText": fix.content,
                    }
                    yield self._action(
                        UNUSED_NOQA_FIX, QUICKFIX, document, [edit], diagnostic, preferred=True
                    )
                continue
            action = self._disable_action(document, lint, finding, diagnostic)
            if action is not None:
                yield action

    def _disable_action(
        self, document: _Document, lint: _Lint, finding: Finding, diagnostic: dict[str, Any]
    ) -> dict[str, Any] | None:
        """``--add-noqa``'s edit for one finding: ``# noqa: CODE`` on its line, merged into a
        directive already there. A line that cannot take one gets a disabled action saying
        why (for a client that shows those), else none."""
        facts = lint.line_facts()
        if facts is None or not 0 < finding.row <= len(lint.lines):
            return None
        title = f"Disable {finding.code} for this line"
        line = lint.lines[finding.row - 1]
        why = why_no_directive(finding.row, line, facts)
        if why is not None:
            if not self._capability("textDocument", "codeAction", "disabledSupport"):
                return None
            return {
                "title": title,
                "kind": QUICKFIX,
                "diagnostics": [diagnostic],
                "disabled": {"reason": why},
            }
        edited = with_directive(line, facts.comments.get(finding.row), {finding.code})
        if edited == line:
            return None  # a bare directive already suppresses every code
        edit = _line_edit(finding.row - 1, line, edited, self._encoding)
        return self._action(title, QUICKFIX, document, [edit], diagnostic)

    def _fix_all(self, document: _Document, lint: _Lint) -> dict[str, Any] | None:
        """Every fix of the document (IL001's), as ``interlace lint --fix`` makes them."""
        if not any(f.fix is not None for f in lint.findings):
            return None
        from interlace.linters._run import lint_stdin

        if document.notebook is not None:
            # A cell's findings are its own already, in its rows: its fixes apply to its text.
            fixed_cell = fix_unused_noqa(lint.data, lint.findings)
            if not fixed_cell.fixed:
                return None
            source: bytes | None = fixed_cell.data
        else:
            try:
                result = lint_stdin(lint.data, filename=document.path, force_exclude=True, fix=True)
            except ConfigError as exc:
                self._show_once(f"interlace: {exc}")
                return None
            source = result.source if result.fixed else None
        if source is None:
            return None
        fixed = _decoded(source, lint.encoding)
        edit = _text_edit(lint.text, fixed, self._encoding)
        return self._action(
            "interlace: Remove all unused `noqa` directives", FIX_ALL, document, [edit], None
        )

    def _action(
        self,
        title: str,
        kind: str,
        document: _Document,
        edits: list[dict[str, Any]],
        diagnostic: dict[str, Any] | None,
        *,
        preferred: bool = False,
    ) -> dict[str, Any]:
        if self._capability("workspace", "workspaceEdit", "documentChanges"):
            # Versioned: a client applies the edit only to the text it was computed for.
            identifier = {"uri": document.uri, "version": document.version}
            edit: dict[str, Any] = {
                "documentChanges": [{"textDocument": identifier, "edits": edits}]
            }
        else:
            edit = {"changes": {document.uri: edits}}
        action: dict[str, Any] = {"title": title, "kind": kind, "edit": edit}
        if diagnostic is not None:
            action["diagnostics"] = [diagnostic]
        if preferred:
            action["isPreferred"] = True
        return action


# Standard input and output ----------------------------------------------------------------


def serve_stdio() -> int:
    """Serve on standard input and output until ``exit`` or the end of input; return the exit
    code (0 after ``shutdown``, 1 without, 2 when there is no standard input)."""
    stdin, stdout = sys.stdin, sys.stdout
    if stdin is None or stdout is None:
        print(
            "interlace server: error: no standard input or output to speak LSP on; an "
            "editor starts `interlace server` with both as pipes",
            file=sys.stderr,
        )
        return 2
    if stdin.isatty():
        print(
            "interlace server: speaking the Language Server Protocol on standard input and "
            "output; an editor starts this command (see `interlace server --help`)",
            file=sys.stderr,
            flush=True,
        )
    protocol = stdout.buffer
    # Standard output is the protocol channel: a stray print anywhere must not corrupt it.
    sys.stdout = sys.stderr
    try:
        return Server().serve(stdin.buffer, protocol)
    finally:
        sys.stdout = stdout
