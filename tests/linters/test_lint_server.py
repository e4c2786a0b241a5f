"""``interlace server``: the linter over the Language Server Protocol.

The end-to-end tests start ``python -m interlace server`` and speak LSP to it through a small
client whose every wait has a deadline, with a watchdog that kills the server, so that no test
can hang. The position conversions and the incremental edits are pure functions, tested alone.
"""

from __future__ import annotations

import io
import json
import os
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from lint_project import put

from interlace.linters._lsp import (
    UTF8,
    UTF16,
    UTF32,
    Server,
    _Input,
    apply_change,
    decode_column,
    encode_column,
    text_offset,
)

WAIT = 30.0
"""The longest any single wait for the server may take (a slow CI machine, libcst's import)."""
WATCHDOG = 120.0
"""The longest a server may live: then it is killed, whatever the test is waiting for."""

RACY = (
    "class Agent:\n"
    "    async def run(self, task):\n"
    "        if self.state != 'idle':\n"
    "            raise RuntimeError('busy')\n"
    "        await self.load_tools()\n"
    "        self.state = 'running'\n"
    "        return await self.step(task)\n"
)
IL101 = "`self.state` is written after a suspension point that follows its check"
EMOJI = RACY.replace("        self.state = 'running'", "        x = '😀😀'; self.state = 'running'")


# A client --------------------------------------------------------------------------------


class Client:
    """A language client on the other end of a server subprocess's pipes.

    Every message the server sends is kept in ``received``, in order; waits give up after
    ``WAIT`` seconds with what arrived so far.
    """

    def __init__(self, cwd: Path) -> None:
        self.stderr = (cwd / ".server-stderr").open("w+b")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "interlace", "server"],
            cwd=cwd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.stderr,
        )
        self._watchdog = threading.Timer(WATCHDOG, self.process.kill)
        self._watchdog.start()
        self._inbox: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self.received: list[dict[str, Any]] = []
        self._seen = 0
        self._next_id = 0
        assert self.process.stdout is not None
        threading.Thread(target=self._read, args=(self.process.stdout,), daemon=True).start()

    def _read(self, stream: IO[bytes]) -> None:
        while True:
            length = None
            while True:
                line = stream.readline()
                if not line:
                    self._inbox.put(None)
                    return
                if line == b"\r\n":
                    break
                name, _, value = line.decode("ascii").partition(":")
                assert name in ("Content-Length", "Content-Type"), line
                if name == "Content-Length":
                    length = int(value)
            assert length is not None
            self._inbox.put(json.loads(stream.read(length)))

    def send_raw(self, data: bytes) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(data)
        self.process.stdin.flush()

    def send(self, message: dict[str, Any]) -> None:
        body = json.dumps({"jsonrpc": "2.0", **message}).encode("utf-8")
        self.send_raw(b"Content-Length: %d\r\n\r\n" % len(body) + body)

    def notify(self, method: str, params: Any = None) -> None:
        self.send({"method": method, "params": params})

    def request(self, method: str, params: Any = None) -> dict[str, Any]:
        """Send a request and return its response (``result`` or ``error``)."""
        self._next_id += 1
        id_ = self._next_id
        self.send({"id": id_, "method": method, "params": params})
        return self.wait_for(lambda m: m.get("id") == id_ and "method" not in m)

    def wait_for(self, matches: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
        """The next message (after those already waited for) that ``matches``."""
        while True:
            while self._seen < len(self.received):
                message = self.received[self._seen]
                self._seen += 1
                if matches(message):
                    return message
            try:
                arrived = self._inbox.get(timeout=WAIT)
            except queue.Empty:
                raise AssertionError(f"no such message in {WAIT}s; got {self.received}") from None
            if arrived is None:
                raise AssertionError(f"the server closed its output; got {self.received}")
            self.received.append(arrived)

    def diagnostics(self, uri: str) -> dict[str, Any]:
        """The params of the next ``publishDiagnostics`` for ``uri``."""
        published = self.wait_for(
            lambda m: (
                m.get("method") == "textDocument/publishDiagnostics" and m["params"]["uri"] == uri
            )
        )
        params: dict[str, Any] = published["params"]
        return params

    def notifications(self, method: str) -> list[dict[str, Any]]:
        return [m["params"] for m in self.received if m.get("method") == method]

    def initialize(
        self, *, encodings: list[str] | None = None, capabilities: Any = None, root: Path
    ) -> dict[str, Any]:
        if capabilities is None:
            capabilities = {
                "textDocument": {
                    "codeAction": {
                        "codeActionLiteralSupport": {
                            "codeActionKind": {"valueSet": ["quickfix", "source"]}
                        }
                    }
                }
            }
        if encodings is not None:
            capabilities = {**capabilities, "general": {"positionEncodings": encodings}}
        response = self.request(
            "initialize",
            {"processId": None, "rootUri": root.as_uri(), "capabilities": capabilities},
        )
        self.notify("initialized", {})
        result: dict[str, Any] = response["result"]
        return result

    def open(self, path: Path, text: str, *, language: str = "python", version: int = 1) -> str:
        uri = path.as_uri()
        self.notify(
            "textDocument/didOpen",
            {
                "textDocument": {
                    "uri": uri,
                    "languageId": language,
                    "version": version,
                    "text": text,
                }
            },
        )
        return uri

    def change(self, uri: str, version: int, *changes: dict[str, Any]) -> None:
        self.notify(
            "textDocument/didChange",
            {"textDocument": {"uri": uri, "version": version}, "contentChanges": list(changes)},
        )

    def code_actions(
        self, uri: str, diagnostics: list[dict[str, Any]], only: list[str] | None = None
    ) -> list[dict[str, Any]]:
        context: dict[str, Any] = {"diagnostics": diagnostics}
        if only is not None:
            context["only"] = only
        whole = {"start": {"line": 0, "character": 0}, "end": {"line": 10**6, "character": 0}}
        response = self.request(
            "textDocument/codeAction",
            {"textDocument": {"uri": uri}, "range": whole, "context": context},
        )
        result: list[dict[str, Any]] = response["result"]
        return result

    def exit_code(self) -> int:
        return self.process.wait(timeout=WAIT)

    def close(self) -> None:
        self._watchdog.cancel()
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=WAIT)
        for stream in (self.process.stdin, self.process.stdout):
            if stream is not None:
                stream.close()
        self.stderr.close()


@pytest.fixture
def client(project: Path) -> Iterator[Client]:
    """A server running in ``project`` (its working directory), not yet initialized."""
    started = Client(project)
    try:
        yield started
    finally:
        started.close()


def span(line: int, character: int, end_line: int, end_character: int) -> dict[str, Any]:
    return {
        "start": {"line": line, "character": character},
        "end": {"line": end_line, "character": end_character},
    }


def utf16_offset(text: str, position: dict[str, int]) -> int:
    """The index in ``text`` of a UTF-16 position, computed independently of the server."""
    lines = text.splitlines(keepends=True) or [""]
    if position["line"] >= len(lines):
        return len(text)
    start = sum(len(line) for line in lines[: position["line"]])
    line = lines[position["line"]].rstrip("\r\n")
    units, index = 0, 0
    while index < len(line) and units < position["character"]:
        units += 2 if ord(line[index]) > 0xFFFF else 1
        index += 1
    return start + index


def apply_edits(text: str, edits: list[dict[str, Any]]) -> str:
    """``text`` with LSP ``TextEdit``s (UTF-16) applied, all relative to the original text."""
    spans = [
        (utf16_offset(text, e["range"]["start"]), utf16_offset(text, e["range"]["end"]), e)
        for e in edits
    ]
    for start, end, edit in sorted(spans, key=lambda s: s[0], reverse=True):
        text = text[:start] + edit["newText"] + text[end:]
    return text


def edits_of(action: dict[str, Any], uri: str) -> list[dict[str, Any]]:
    edits: list[dict[str, Any]] = action["edit"]["changes"][uri]
    return edits


# Position conversions and incremental edits (pure) ---------------------------------------

LINE = "a😀b é"
"""a, a non-BMP character (2 UTF-16 units, 4 UTF-8 bytes), b, a space and é (2 UTF-8 bytes)."""


@pytest.mark.parametrize(
    ("column", "utf16", "utf8"),
    [(0, 0, 0), (1, 1, 1), (2, 3, 5), (3, 4, 6), (4, 5, 7), (5, 6, 9), (9, 6, 9), (-1, 0, 0)],
)
def test_a_code_point_column_is_encoded_in_each_position_encoding(
    column: int, utf16: int, utf8: int
) -> None:
    assert encode_column(LINE, column, UTF16) == utf16
    assert encode_column(LINE, column, UTF8) == utf8
    assert encode_column(LINE, column, UTF32) == min(max(column, 0), len(LINE))


@pytest.mark.parametrize(
    ("character", "encoding", "column"),
    [
        (3, UTF16, 2),
        (2, UTF16, 1),  # between the halves of the surrogate pair: the pair's start
        (5, UTF8, 2),
        (3, UTF8, 1),  # inside the 4-byte sequence
        (8, UTF8, 4),  # inside é's 2 bytes
        (99, UTF16, 5),  # past the end: the end of the line
        (99, UTF32, 5),
        (-3, UTF16, 0),
    ],
)
def test_an_lsp_character_offset_is_decoded_to_a_code_point_column(
    character: int, encoding: str, column: int
) -> None:
    assert decode_column(LINE, character, encoding) == column


@pytest.mark.parametrize(
    ("line", "character", "offset"),
    [
        (0, 0, 0),
        (1, 1, 5),
        (1, 99, 6),  # past the end of the line: before its \r\n
        (2, 1, 9),  # after a \r\n
        (3, 0, 11),  # after a lone \r
        (4, 0, 14),  # the last, empty line
        (9, 5, 14),  # past the last line: the end of the text
    ],
)
def test_a_position_is_an_offset_in_the_text_with_every_kind_of_line_break(
    line: int, character: int, offset: int
) -> None:
    text = "abc\nde\r\nfg\rhi\n"
    assert text_offset(text, {"line": line, "character": character}, UTF16) == offset


@pytest.mark.parametrize(
    ("change", "encoding", "expected"),
    [
        pytest.param({"text": "new"}, UTF16, "new", id="full-document"),
        pytest.param(
            {"range": span(0, 2, 2, 1), "text": "-"}, UTF16, "ab-ine 3\n", id="across-lines"
        ),
        pytest.param(
            {"range": span(1, 0, 1, 0), "text": "x\ny"},
            UTF16,
            "ab😀c\nx\nyline 2\nline 3\n",
            id="insert-lines",
        ),
        pytest.param(
            {"range": span(0, 4, 0, 5), "text": "C"},
            UTF16,
            "ab😀C\nline 2\nline 3\n",
            id="after-surrogate-pair-utf16",
        ),
        pytest.param(
            {"range": span(0, 2, 0, 4), "text": ""},
            UTF16,
            "abc\nline 2\nline 3\n",
            id="remove-surrogate-pair-utf16",
        ),
        pytest.param(
            {"range": span(0, 6, 0, 7), "text": "C"},
            UTF8,
            "ab😀C\nline 2\nline 3\n",
            id="after-4-byte-sequence-utf8",
        ),
        pytest.param(
            {"range": span(0, 3, 0, 4), "text": "C"},
            UTF32,
            "ab😀C\nline 2\nline 3\n",
            id="utf32-counts-code-points",
        ),
        pytest.param(
            {"range": span(2, 6, 5, 0), "text": "!"},
            UTF16,
            "ab😀c\nline 2\nline 3!",
            id="to-past-the-end",
        ),
        pytest.param(
            {"range": span(1, 4, 1, 2), "text": ""},
            UTF16,
            "ab😀c\nli 2\nline 3\n",
            id="reversed-range",
        ),
    ],
)
def test_an_incremental_change_replaces_its_range(
    change: dict[str, Any], encoding: str, expected: str
) -> None:
    assert apply_change("ab😀c\nline 2\nline 3\n", change, encoding) == expected


def test_a_change_across_crlf_lines_keeps_the_other_breaks() -> None:
    change = {"range": span(0, 1, 1, 1), "text": "X"}
    assert apply_change("ab\r\ncd\r\nef", change, UTF16) == "aXd\r\nef"


_TEXT = st.text(st.sampled_from("ab é😀\n\r\t𝄞"), max_size=30)


@given(text=_TEXT, data=st.data(), encoding=st.sampled_from([UTF8, UTF16, UTF32]))
def test_a_range_encoded_from_code_points_edits_exactly_those_code_points(
    text: str, data: st.DataObject, encoding: str
) -> None:
    start = data.draw(st.integers(0, len(text)))
    end = data.draw(st.integers(start, len(text)))
    new = data.draw(_TEXT)

    def position(offset: int) -> dict[str, int]:
        if offset > 0 and text[offset - 1] == "\r" and text[offset : offset + 1] == "\n":
            offset -= 1  # inside a \r\n: no position names it; the break's start does
        head = text[:offset]
        line_start = max(head.rfind("\n"), head.rfind("\r")) + 1
        line = head.count("\n") + head.count("\r") - head.count("\r\n")
        return {
            "line": line,
            "character": encode_column(text[line_start:], offset - line_start, encoding),
        }

    first, last = position(start), position(end)
    change = {"range": {"start": first, "end": last}, "text": new}
    lo, hi = text_offset(text, first, encoding), text_offset(text, last, encoding)
    assert apply_change(text, change, encoding) == text[:lo] + new + text[hi:]
    assert (lo, hi) == (
        start - (start > 0 and text[start - 1 : start + 1] == "\r\n"),
        end - (end > 0 and text[end - 1 : end + 1] == "\r\n"),
    )


# Reading messages (pure) -----------------------------------------------------------------


def frame(body: bytes) -> bytes:
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def test_the_input_gives_pygls_lines_and_bodies_across_chunks() -> None:
    read, write = os.pipe()
    with os.fdopen(read, "rb") as stream:
        source = _Input(stream)
        for part in (b"Content-Le", b"ngth: 2\r\n\r", b"\n{", b"}tail"):
            os.write(write, part)
        os.close(write)
        assert source.readline() == b"Content-Length: 2\r\n"
        assert source.readline() == b"\r\n"
        assert source.read(2) == b"{}"
        assert source.readline() == b"tail"  # the end of input ends the line
        assert (source.readline(), source.read(3), source.pending()) == (b"", b"", False)


def test_closing_the_input_ends_it_while_the_client_keeps_its_end_open() -> None:
    read, write = os.pipe()
    try:
        with os.fdopen(read, "rb") as stream:
            source = _Input(stream)
            os.write(write, b"unread\n")
            source.close()
            assert (source.readline(), source.read(1)) == (b"", b"")
    finally:
        os.close(write)


def serve_in_process(
    messages: list[dict[str, Any]], done: Callable[[bytes], bool]
) -> tuple[int, list[dict[str, Any]]]:
    """Serve ``messages``, all sent at once on a pipe, until ``done(output)``; then end the
    input. Returns the exit code and what the server sent."""
    read, write = os.pipe()
    output = io.BytesIO()
    codes: list[int] = []
    with os.fdopen(read, "rb") as stream:
        thread = threading.Thread(
            target=lambda: codes.append(Server(log=io.StringIO()).serve(stream, output))
        )
        os.write(
            write, b"".join(frame(json.dumps({"jsonrpc": "2.0", **m}).encode()) for m in messages)
        )
        thread.start()
        deadline = time.monotonic() + WAIT
        while not done(output.getvalue()) and time.monotonic() < deadline:
            time.sleep(0.01)
        os.close(write)
        thread.join(WAIT)
    sent = []
    data = output.getvalue()
    while data:
        head, _, rest = data.partition(b"\r\n\r\n")
        length = int(head.split(b"\r\n")[0].split(b":")[1])
        sent.append(json.loads(rest[:length]))
        data = rest[length:]
    return codes[0], sent


def test_a_truncated_message_is_the_end_of_input() -> None:
    read, write = os.pipe()
    os.write(write, b"Content-Length: 10\r\n\r\n{}")
    os.close(write)
    with os.fdopen(read, "rb") as stream:
        assert Server(log=io.StringIO()).serve(stream, io.BytesIO()) == 1


# Coalescing (in-process) -------------------------------------------------------------------


def test_queued_changes_are_linted_once_at_their_last_version(project: Path) -> None:
    uri = (project / "a.py").as_uri()
    item = {"uri": uri, "languageId": "python", "version": 1, "text": "x = 1\n"}
    messages: list[dict[str, Any]] = [
        {"id": 1, "method": "initialize", "params": {"capabilities": {}}},
        {"method": "initialized", "params": {}},
        {"method": "textDocument/didOpen", "params": {"textDocument": item}},
        *(
            {
                "method": "textDocument/didChange",
                "params": {
                    "textDocument": {"uri": uri, "version": version},
                    "contentChanges": [{"text": text}],
                },
            }
            for version, text in [(2, "x = 2\n"), (3, RACY)]
        ),
    ]
    code, sent = serve_in_process(messages, lambda out: b"publishDiagnostics" in out)
    assert code == 1  # the end of input without shutdown
    published = [m["params"] for m in sent if m.get("method") == "textDocument/publishDiagnostics"]
    assert [(p["version"], [d["code"] for d in p["diagnostics"]]) for p in published] == [
        (3, ["IL101"])
    ]


# The protocol, end to end ----------------------------------------------------------------


def test_initialize_announces_the_capabilities(client: Client, project: Path) -> None:
    from interlace import __version__

    assert client.initialize(root=project) == {
        "capabilities": {
            "positionEncoding": "utf-16",
            "textDocumentSync": {"openClose": True, "change": 2, "save": True},
            "notebookDocumentSync": {"notebookSelector": [{"cells": [{"language": "python"}]}]},
            "codeActionProvider": {
                "codeActionKinds": ["quickfix", "source.fixAll.interlace"],
                "resolveProvider": False,
            },
        },
        "serverInfo": {"name": "interlace", "version": __version__},
    }


def test_a_client_without_code_action_literals_gets_no_code_action_provider(
    client: Client, project: Path
) -> None:
    result = client.initialize(root=project, capabilities={})
    assert "codeActionProvider" not in result["capabilities"]


@pytest.mark.parametrize(
    ("offered", "negotiated"),
    [
        (None, "utf-16"),
        (["utf-16"], "utf-16"),
        (["utf-8", "utf-16"], "utf-8"),
        (["utf-16", "utf-32"], "utf-32"),
        (["utf-8", "utf-16", "utf-32"], "utf-32"),
    ],
)
def test_the_position_encoding_is_negotiated(
    client: Client, project: Path, offered: list[str] | None, negotiated: str
) -> None:
    result = client.initialize(root=project, encodings=offered)
    assert result["capabilities"]["positionEncoding"] == negotiated


def test_an_open_document_gets_its_findings_as_diagnostics(client: Client, project: Path) -> None:
    client.initialize(root=project)
    uri = client.open(project / "agent.py", RACY, version=7)
    published = client.diagnostics(uri)
    assert published["version"] == 7
    [diagnostic] = published["diagnostics"]
    assert diagnostic["message"].startswith(IL101)
    assert {k: v for k, v in diagnostic.items() if k != "message"} == {
        "range": span(5, 8, 5, 18),
        "severity": 2,
        "code": "IL101",
        "source": "interlace",
        "relatedInformation": [
            {
                "location": {"uri": uri, "range": span(2, 11, 2, 21)},
                "message": "`self.state` is checked here",
            },
            {
                "location": {"uri": uri, "range": span(4, 8, 4, 31)},
                "message": "the task can be suspended here",
            },
        ],
    }


def test_an_incremental_change_that_fixes_the_race_clears_the_diagnostics(
    client: Client, project: Path
) -> None:
    client.initialize(root=project)
    uri = client.open(project / "agent.py", RACY)
    assert len(client.diagnostics(uri)["diagnostics"]) == 1
    # Move the write before the await: delete it on line 5, insert it above line 4.
    client.change(
        uri,
        2,
        {"range": span(4, 31, 5, 30), "text": ""},
        {"range": span(4, 0, 4, 0), "text": "        self.state = 'running'\n"},
    )
    assert client.diagnostics(uri) == {"uri": uri, "version": 2, "diagnostics": []}


@pytest.mark.parametrize(
    ("offered", "start", "end"),
    [(None, 20, 30), (["utf-8"], 24, 34), (["utf-32", "utf-16"], 18, 28)],
)
def test_columns_after_non_bmp_characters_count_the_negotiated_units(
    client: Client, project: Path, offered: list[str] | None, start: int, end: int
) -> None:
    client.initialize(root=project, encodings=offered)
    uri = client.open(project / "agent.py", EMOJI)
    [diagnostic] = client.diagnostics(uri)["diagnostics"]
    assert diagnostic["range"] == span(5, start, 5, end)


def test_an_incremental_change_after_non_bmp_characters_is_applied_in_utf16(
    client: Client, project: Path
) -> None:
    client.initialize(root=project)
    uri = client.open(project / "agent.py", EMOJI)
    client.diagnostics(uri)
    # Rename `self.state` on line 5 (after two emoji, 4 UTF-16 units) to `self.other`.
    client.change(uri, 2, {"range": span(5, 25, 5, 30), "text": "other"})
    assert client.diagnostics(uri)["diagnostics"] == []
    client.change(uri, 3, {"range": span(5, 25, 5, 30), "text": "state"})
    [diagnostic] = client.diagnostics(uri)["diagnostics"]
    assert diagnostic["range"] == span(5, 20, 5, 30)


def test_disable_for_this_line_adds_a_noqa_directive(client: Client, project: Path) -> None:
    client.initialize(root=project)
    text = EMOJI.replace("'running'", "'running'  # keep")
    uri = client.open(project / "agent.py", text)
    diagnostics = client.diagnostics(uri)["diagnostics"]
    [action] = client.code_actions(uri, diagnostics)
    assert action["title"] == "Disable IL101 for this line"
    assert action["kind"] == "quickfix"
    assert action["diagnostics"] == diagnostics
    fixed = apply_edits(text, edits_of(action, uri))
    assert fixed == text.replace("'running'  # keep", "'running'  # keep  # noqa: IL101")
    client.change(uri, 2, {"text": fixed})
    assert client.diagnostics(uri)["diagnostics"] == []


def test_disable_for_this_line_merges_into_an_existing_directive(
    client: Client, project: Path
) -> None:
    client.initialize(root=project)
    text = RACY.replace("'running'", "'running'  # noqa: E501 reason")
    uri = client.open(project / "agent.py", text)
    diagnostics = client.diagnostics(uri)["diagnostics"]
    [action] = client.code_actions(uri, diagnostics)
    assert action["edit"]["changes"][uri] == [{"range": span(5, 44, 5, 44), "newText": ", IL101"}]
    assert apply_edits(text, edits_of(action, uri)) == text.replace("E501", "E501, IL101")


def test_an_action_for_a_stale_diagnostic_is_not_offered(client: Client, project: Path) -> None:
    client.initialize(root=project)
    uri = client.open(project / "agent.py", RACY)
    diagnostics = client.diagnostics(uri)["diagnostics"]
    client.change(uri, 2, {"range": span(0, 0, 0, 0), "text": "\n"})  # every row moves down
    assert client.code_actions(uri, diagnostics) == []


def test_edits_are_versioned_for_a_client_that_takes_document_changes(
    client: Client, project: Path
) -> None:
    capabilities = {
        "textDocument": {"codeAction": {"codeActionLiteralSupport": {}}},
        "workspace": {"workspaceEdit": {"documentChanges": True}},
    }
    client.initialize(root=project, capabilities=capabilities)
    uri = client.open(project / "agent.py", RACY, version=4)
    [action] = client.code_actions(uri, client.diagnostics(uri)["diagnostics"])
    assert action["edit"] == {
        "documentChanges": [
            {
                "textDocument": {"uri": uri, "version": 4},
                "edits": [{"range": span(5, 30, 5, 30), "newText": "  # noqa: IL101"}],
            }
        ]
    }


def test_a_line_that_cannot_take_a_directive_gets_a_disabled_action_saying_why(
    client: Client, project: Path
) -> None:
    capabilities = {
        "textDocument": {"codeAction": {"codeActionLiteralSupport": {}, "disabledSupport": True}}
    }
    client.initialize(root=project, capabilities=capabilities)
    text = (
        "import asyncio\nLOCK = asyncio.Lock('''\n''')\nOTHER = asyncio.Lock(); y = 1 + \\\n    2\n"
    )
    uri = client.open(project / "a.py", text)
    diagnostics = client.diagnostics(uri)["diagnostics"]
    assert [d["code"] for d in diagnostics] == ["IL201", "IL201"]
    actions = client.code_actions(uri, diagnostics)
    assert [a["title"] for a in actions] == ["Disable IL201 for this line"] * 2
    assert all("edit" not in a for a in actions)
    assert actions[0]["disabled"]["reason"].startswith("the line ends inside a multi-line string")
    assert actions[1]["disabled"]["reason"].startswith("the line ends with a backslash")


UNUSED = "import asyncio\nLOCK = asyncio.Lock()  # noqa: IL101, IL201\nx = 1  # noqa: IL301\n"
UNUSED_FIXED = "import asyncio\nLOCK = asyncio.Lock()  # noqa: IL201\nx = 1\n"


@pytest.fixture
def il001(project: Path) -> Path:
    put(project, "pyproject.toml", '[tool.interlace.lint]\nextend-select = ["IL001"]\n')
    return project


def test_an_unused_directive_is_removed_by_its_quick_fix(client: Client, il001: Path) -> None:
    client.initialize(root=il001)
    uri = client.open(il001 / "a.py", UNUSED)
    diagnostics = client.diagnostics(uri)["diagnostics"]
    assert [(d["code"], d["range"], d.get("tags")) for d in diagnostics] == [
        ("IL001", span(1, 23, 1, 43), [1]),
        ("IL001", span(2, 7, 2, 20), [1]),
    ]
    first, second = (client.code_actions(uri, [d]) for d in diagnostics)
    assert [(a["title"], a["kind"], a.get("isPreferred")) for a in first] == [
        ("Remove unused `noqa` directive", "quickfix", True),
        ("interlace: Remove all unused `noqa` directives", "source.fixAll.interlace", None),
    ]
    assert apply_edits(UNUSED, edits_of(first[0], uri)) == UNUSED.replace("IL101, ", "")
    assert apply_edits(UNUSED, edits_of(second[0], uri)) == UNUSED.replace("  # noqa: IL301", "")


@pytest.mark.parametrize("only", [["source.fixAll"], ["source"], ["source.fixAll.interlace"]])
def test_fix_all_removes_every_unused_directive(
    client: Client, il001: Path, only: list[str]
) -> None:
    client.initialize(root=il001)
    text = ("# noqa: IL101\n" + UNUSED + "y = 2\n").replace("\n", "\r\n")
    uri = client.open(il001 / "a.py", text)
    client.diagnostics(uri)
    [action] = client.code_actions(uri, [], only=only)
    assert action["kind"] == "source.fixAll.interlace"
    fixed = (UNUSED_FIXED + "y = 2\n").replace("\n", "\r\n")
    assert apply_edits(text, edits_of(action, uri)) == fixed


def test_only_quickfix_leaves_out_fix_all(client: Client, il001: Path) -> None:
    client.initialize(root=il001)
    uri = client.open(il001 / "a.py", UNUSED)
    diagnostics = client.diagnostics(uri)["diagnostics"]
    actions = client.code_actions(uri, diagnostics, only=["quickfix"])
    assert [a["kind"] for a in actions] == ["quickfix", "quickfix"]
    assert client.code_actions(uri, diagnostics, only=["refactor"]) == []


def test_a_syntax_error_is_one_error_diagnostic(client: Client, project: Path) -> None:
    client.initialize(root=project)
    uri = client.open(project / "a.py", "import asyncio\ndef f(:\n    pass\n")
    assert client.diagnostics(uri)["diagnostics"] == [
        {
            "range": span(1, 6, 1, 7),
            "severity": 1,
            "code": "invalid-syntax",
            "source": "interlace",
            "message": "cannot parse: invalid syntax",
        }
    ]


def test_a_bad_configuration_is_shown_once_and_the_server_keeps_serving(
    client: Client, project: Path
) -> None:
    put(project, "pyproject.toml", '[tool.interlace.lint]\nselect = "IL1"\n')
    client.initialize(root=project)
    for name in ("a.py", "b.py"):
        uri = client.open(project / name, RACY)
        assert client.diagnostics(uri)["diagnostics"] == []
    shown = client.notifications("window/showMessage")
    assert len(shown) == 1
    assert shown[0]["type"] == 1
    assert shown[0]["message"].startswith("interlace: invalid value for 'select' in ")
    put(project, "pyproject.toml", "[tool.interlace.lint]\n")
    client.notify(
        "workspace/didChangeWatchedFiles",
        {"changes": [{"uri": (project / "pyproject.toml").as_uri(), "type": 2}]},
    )
    assert [d["code"] for d in client.diagnostics(uri)["diagnostics"]] == ["IL101"]


def test_a_changed_pyproject_relints_the_open_documents(client: Client, project: Path) -> None:
    client.initialize(root=project)
    uri = client.open(project / "agent.py", RACY)
    assert len(client.diagnostics(uri)["diagnostics"]) == 1
    put(project, "pyproject.toml", '[tool.interlace.lint]\nignore = ["IL101"]\n')
    client.notify(
        "workspace/didChangeWatchedFiles",
        {"changes": [{"uri": (project / "pyproject.toml").as_uri(), "type": 2}]},
    )
    assert client.diagnostics(uri) == {"uri": uri, "version": 1, "diagnostics": []}


def test_the_server_watches_configuration_files_when_the_client_lets_it(
    client: Client, project: Path
) -> None:
    capabilities = {"workspace": {"didChangeWatchedFiles": {"dynamicRegistration": True}}}
    client.initialize(root=project, capabilities=capabilities)
    registration = client.wait_for(lambda m: m.get("method") == "client/registerCapability")
    assert registration["params"] == {
        "registrations": [
            {
                "id": "interlace/watch-configuration",
                "method": "workspace/didChangeWatchedFiles",
                "registerOptions": {
                    "watchers": [
                        {"globPattern": "**/.gitignore"},
                        {"globPattern": "**/pyproject.toml"},
                    ]
                },
            }
        ]
    }
    client.send({"id": registration["id"], "result": None})
    assert client.request("shutdown")["result"] is None


PULL = {"textDocument": {"diagnostic": {"dynamicRegistration": False}}}


def pull(client: Client, uri: str, previous: str | None = None) -> dict[str, Any]:
    params: dict[str, Any] = {"textDocument": {"uri": uri}}
    if previous is not None:
        params["previousResultId"] = previous
    result: dict[str, Any] = client.request("textDocument/diagnostic", params)["result"]
    return result


def test_a_client_that_pulls_diagnostics_gets_them_only_when_it_asks(
    client: Client, project: Path
) -> None:
    capabilities = client.initialize(root=project, capabilities=PULL)["capabilities"]
    assert capabilities["diagnosticProvider"] == {
        "identifier": "interlace",
        "interFileDependencies": False,
        "workspaceDiagnostics": False,
    }
    uri = client.open(project / "agent.py", RACY)
    report = pull(client, uri)
    assert report["kind"] == "full"
    assert [d["code"] for d in report["items"]] == ["IL101"]
    assert report["items"][0]["message"].startswith(IL101)
    # The same findings: "unchanged", even after an edit that changes none of them.
    assert pull(client, uri, report["resultId"]) == {
        "kind": "unchanged",
        "resultId": report["resultId"],
    }
    client.change(uri, 2, {"text": RACY + "\n# a comment\n"})
    assert pull(client, uri, report["resultId"])["kind"] == "unchanged"
    fixed = RACY.replace("        await self.load_tools()\n", "")
    client.change(uri, 3, {"text": fixed})
    after = pull(client, uri, report["resultId"])
    assert after["kind"] == "full"
    assert after["items"] == []
    assert after["resultId"] != report["resultId"]
    client.notify("textDocument/didClose", {"textDocument": {"uri": uri}})
    assert pull(client, uri) == {"kind": "full", "items": []}  # not open: nothing to show
    assert client.request("shutdown")["result"] is None
    assert client.notifications("textDocument/publishDiagnostics") == []


def test_a_changed_pyproject_asks_a_pulling_client_to_pull_again(
    client: Client, project: Path
) -> None:
    capabilities = {**PULL, "workspace": {"diagnostics": {"refreshSupport": True}}}
    client.initialize(root=project, capabilities=capabilities)
    uri = client.open(project / "agent.py", RACY)
    assert len(pull(client, uri)["items"]) == 1
    put(project, "pyproject.toml", '[tool.interlace.lint]\nignore = ["IL101"]\n')
    client.notify(
        "workspace/didChangeWatchedFiles",
        {"changes": [{"uri": (project / "pyproject.toml").as_uri(), "type": 2}]},
    )
    refresh = client.wait_for(lambda m: m.get("method") == "workspace/diagnostic/refresh")
    client.send({"id": refresh["id"], "result": None})
    assert pull(client, uri)["items"] == []


def test_per_file_ignores_and_exclusions_apply_to_open_documents(
    client: Client, project: Path
) -> None:
    put(
        project,
        "pyproject.toml",
        '[tool.interlace.lint]\nper-file-ignores = {"tests/**" = ["IL101"]}\n'
        'extend-exclude = ["build/**"]\n',
    )
    client.initialize(root=project)
    for name in ("tests/t.py", "build/b.py", "src/s.py"):
        uri = client.open(project / name, RACY)
        codes = [d["code"] for d in client.diagnostics(uri)["diagnostics"]]
        assert codes == ([] if name != "src/s.py" else ["IL101"]), name


def test_closing_a_document_clears_its_diagnostics(client: Client, project: Path) -> None:
    client.initialize(root=project)
    uri = client.open(project / "agent.py", RACY)
    assert len(client.diagnostics(uri)["diagnostics"]) == 1
    client.notify("textDocument/didClose", {"textDocument": {"uri": uri}})
    assert client.diagnostics(uri) == {"uri": uri, "diagnostics": []}


def test_only_python_documents_are_linted_and_untitled_ones_are(
    client: Client, project: Path
) -> None:
    client.initialize(root=project)
    client.open(project / "notes.txt", RACY, language="plaintext")
    # A notebook's JSON, even one a client calls Python, has findings by cell, not by line.
    client.open(project / "nb.ipynb", RACY, language="python")
    untitled = "untitled:Untitled-1"
    client.notify(
        "textDocument/didOpen",
        {"textDocument": {"uri": untitled, "languageId": "python", "version": 1, "text": RACY}},
    )
    stub = client.open(project / "typed.pyi", RACY, language="")
    assert [d["code"] for d in client.diagnostics(untitled)["diagnostics"]] == ["IL101"]
    assert [d["code"] for d in client.diagnostics(stub)["diagnostics"]] == ["IL101"]
    published = client.notifications("textDocument/publishDiagnostics")
    assert [p["uri"] for p in published] == [untitled, stub]


def test_shutdown_then_exit_exits_0(client: Client, project: Path) -> None:
    client.initialize(root=project)
    assert client.request("shutdown") == {"jsonrpc": "2.0", "id": 2, "result": None}
    after = client.request("textDocument/codeAction", {})
    assert after["error"]["code"] == -32600
    client.notify("exit")
    assert client.exit_code() == 0


def test_shutdown_and_exit_without_params_are_answered(client: Client, project: Path) -> None:
    client.initialize(root=project)
    client.send({"id": "bye", "method": "shutdown"})  # as clients send it: no "params"
    assert client.wait_for(lambda m: m.get("id") == "bye") == {
        "jsonrpc": "2.0",
        "id": "bye",
        "result": None,
    }
    client.send({"method": "exit"})
    assert client.exit_code() == 0


def test_exit_without_shutdown_exits_1(client: Client, project: Path) -> None:
    client.initialize(root=project)
    client.notify("exit")
    assert client.exit_code() == 1


def test_the_end_of_input_without_shutdown_exits_1(client: Client, project: Path) -> None:
    client.initialize(root=project)
    assert client.process.stdin is not None
    client.process.stdin.close()
    assert client.exit_code() == 1


def test_an_unknown_request_is_method_not_found_and_a_notification_is_ignored(
    client: Client, project: Path
) -> None:
    client.initialize(root=project)
    client.notify("$/unknownNotification", {})
    client.notify("$/cancelRequest", {"id": 99})
    response = client.request("textDocument/hover", {})
    assert response["error"] == {"code": -32601, "message": "unknown method 'textDocument/hover'"}


def test_a_request_before_initialize_is_refused(client: Client, project: Path) -> None:
    response = client.request("shutdown")
    assert response["error"]["code"] == -32002
    assert client.initialize(root=project)["serverInfo"]["name"] == "interlace"


def test_invalid_params_are_an_error_not_a_crash(client: Client, project: Path) -> None:
    client.initialize(root=project)
    response = client.request("textDocument/codeAction", {"textDocument": {}})
    assert response["error"] == {
        "code": -32602,
        "message": "invalid params for 'textDocument/codeAction': expected 'uri' to be a str, "
        "got None",
    }


def test_malformed_messages_do_not_stop_the_server(client: Client, project: Path) -> None:
    client.initialize(root=project)
    client.send_raw(frame(b"{this is not json"))
    client.send_raw(frame(b'"a string"'))
    client.send_raw(b"X-Nothing: 1\r\n\r\n")
    uri = client.open(project / "agent.py", RACY)
    assert len(client.diagnostics(uri)["diagnostics"]) == 1
    logged = [m["message"] for m in client.notifications("window/logMessage")]
    assert any(m.startswith("ignored a message that is not JSON") for m in logged)
    assert "ignored a message that is not a JSON object: 'a string'" in logged
    # A header block without Content-Length has no body to read: pygls skips it, unlogged.
    assert client.process.poll() is None


def test_the_other_commands_do_not_import_pygls(project: Path) -> None:
    loaded = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys\nfrom interlace.cli import main\nmain(['lint', '--show-files', '-q'])\n"
            "print(sorted({m.split('.')[0] for m in sys.modules} & {'pygls', 'lsprotocol'}))",
        ],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=WAIT,
    ).stdout
    assert loaded.splitlines()[-1] == "[]"


def test_help_explains_how_to_configure_an_editor() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "interlace", "server", "--help"],
        capture_output=True,
        text=True,
        check=True,
        timeout=WAIT,
    ).stdout
    assert "Language Server Protocol" in out
    for editor in ("Neovim", "Helix", "eglot", "VS Code"):
        assert editor in out


# Notebooks (LSP 3.17 notebook synchronisation) ----------------------------------------------

NOTEBOOK_CELL = "%load_ext autoreload\n" + RACY
"""A cell with an IPython escape (not Python alone) above the racy class."""


def open_notebook(client: Client, path: Path, cells: list[tuple[str, int, str]]) -> list[str]:
    """Open a notebook of ``(name, kind, text)`` cells (kind 1 markup, 2 code); return the
    cells' URIs, as VS Code names them."""
    uri = path.as_uri()
    cell_uris = [f"vscode-notebook-cell:{path}#{name}" for name, _, _ in cells]
    client.notify(
        "notebookDocument/didOpen",
        {
            "notebookDocument": {
                "uri": uri,
                "notebookType": "jupyter-notebook",
                "version": 1,
                "cells": [
                    {"kind": kind, "document": cell_uri}
                    for cell_uri, (_, kind, _) in zip(cell_uris, cells, strict=True)
                ],
            },
            "cellTextDocuments": [
                {
                    "uri": cell_uri,
                    "languageId": "python" if kind == 2 else "markdown",
                    "version": 1,
                    "text": text,
                }
                for cell_uri, (_, kind, text) in zip(cell_uris, cells, strict=True)
            ],
        },
    )
    return cell_uris


def test_a_notebooks_cells_are_linted_together_and_reported_in_their_cell(
    client: Client, project: Path
) -> None:
    capabilities = client.initialize(root=project)["capabilities"]
    assert capabilities["notebookDocumentSync"] == {
        "notebookSelector": [{"cells": [{"language": "python"}]}]
    }
    title, imports, racy = open_notebook(
        client,
        project / "nb.ipynb",
        [("W0", 1, "# A title"), ("W1", 2, "import asyncio"), ("W2", 2, NOTEBOOK_CELL)],
    )
    assert client.diagnostics(imports)["diagnostics"] == []
    (diagnostic,) = client.diagnostics(racy)["diagnostics"]
    # Rows count the cell's lines: the escape line is row 0, the write is row 6.
    assert (diagnostic["code"], diagnostic["range"]) == ("IL101", span(6, 8, 6, 18))
    assert {r["location"]["uri"] for r in diagnostic["relatedInformation"]} == {racy}
    published = [p["uri"] for p in client.notifications("textDocument/publishDiagnostics")]
    assert title not in published  # a markdown cell is not linted


def test_a_notebook_edit_and_a_new_cell_are_linted_again(client: Client, project: Path) -> None:
    client.initialize(root=project)
    path = project / "nb.ipynb"
    (racy,) = open_notebook(client, path, [("W0", 2, NOTEBOOK_CELL)])
    assert len(client.diagnostics(racy)["diagnostics"]) == 1
    first = f"vscode-notebook-cell:{path}#W9"
    client.notify(
        "notebookDocument/didChange",
        {
            "notebookDocument": {"uri": path.as_uri(), "version": 2},
            "change": {
                "cells": {
                    "structure": {
                        "array": {
                            "start": 0,
                            "deleteCount": 0,
                            "cells": [{"kind": 2, "document": first}],
                        },
                        "didOpen": [
                            {"uri": first, "languageId": "python", "version": 1, "text": "x = 1"}
                        ],
                    },
                    "textContent": [
                        {
                            "document": {"uri": racy, "version": 2},
                            # No suspension point between the check and the write any more.
                            "changes": [{"range": span(5, 0, 6, 0), "text": ""}],
                        }
                    ],
                }
            },
        },
    )
    assert client.diagnostics(first)["diagnostics"] == []
    assert client.diagnostics(racy) == {"uri": racy, "version": 2, "diagnostics": []}
    client.notify(
        "notebookDocument/didClose",
        {
            "notebookDocument": {"uri": path.as_uri()},
            "cellTextDocuments": [{"uri": first}, {"uri": racy}],
        },
    )
    assert client.diagnostics(first) == {"uri": first, "diagnostics": []}
    assert client.diagnostics(racy) == {"uri": racy, "diagnostics": []}


def test_a_cells_fixes_and_directives_are_edits_of_that_cell(client: Client, il001: Path) -> None:
    client.initialize(root=il001)
    cell = "!echo hi\n" + UNUSED + RACY
    (uri,) = open_notebook(client, il001 / "nb.ipynb", [("W0", 2, cell)])
    diagnostics = client.diagnostics(uri)["diagnostics"]
    assert [d["code"] for d in diagnostics] == ["IL001", "IL001", "IL101"]
    [fix_all] = client.code_actions(uri, [], only=["source.fixAll"])
    assert apply_edits(cell, edits_of(fix_all, uri)) == "!echo hi\n" + UNUSED_FIXED + RACY
    disable = client.code_actions(uri, [diagnostics[2]], only=["quickfix"])
    assert [a["title"] for a in disable] == ["Disable IL101 for this line"]
    assert apply_edits(cell, edits_of(disable[0], uri)) == cell.replace(
        "'running'\n", "'running'  # noqa: IL101\n"
    )


def test_a_client_that_pulls_gets_a_cells_findings_after_the_notebook_changed(
    client: Client, project: Path
) -> None:
    client.initialize(root=project, capabilities=PULL)
    path = project / "nb.ipynb"
    racy, other = open_notebook(client, path, [("W0", 2, NOTEBOOK_CELL), ("W1", 2, "x = 1")])
    assert [d["code"] for d in pull(client, racy)["items"]] == ["IL101"]
    assert pull(client, other)["items"] == []
    # The racy cell turned into markdown: it has nothing to report any more.
    client.notify(
        "notebookDocument/didChange",
        {
            "notebookDocument": {"uri": path.as_uri(), "version": 2},
            "change": {"cells": {"data": [{"kind": 1, "document": racy}]}},
        },
    )
    assert pull(client, racy)["items"] == []
    assert not client.notifications("textDocument/publishDiagnostics")
