"""Reading a large upload from its file a piece at a time, so memory stays bounded.

``JsonStream`` walks JSON text read from a binary file in 1 MiB pieces: values are decoded one
at a time with ``json.JSONDecoder.raw_decode`` and the consumed text is dropped, so a 100 MB
export never sits in memory whole. ``iter_jsonl_file`` does the same for JSON Lines. Both report
problems like the in-memory readers (file, line, message) and stop at the first syntax error.
"""

from __future__ import annotations

import codecs
import json
from collections.abc import Iterator
from typing import Any, BinaryIO

from interchange.issues import Collector
from interchange.readers import SKIP, checked, parse_line, reject_constant

PIECE = 1 << 20
MAX_VALUE_CHARS = 64 << 20  # one record larger than this is refused rather than buffered
_WS = " \t\r\n"


class StreamError(Exception):
    """The stream cannot go on (the issue is already collected)."""


class JsonStream:
    def __init__(self, f: BinaryIO, filename: str, col: Collector) -> None:
        self.f, self.filename, self.col = f, filename, col
        self.buf, self.pos, self.eof = "", 0, False
        self.line, self.line_pos = 1, 0  # the line number at buffer index line_pos
        self._dec = codecs.getincrementaldecoder("utf-8")("strict")
        self._json = json.JSONDecoder(parse_constant=reject_constant)
        self._read_bytes = 0
        self._started = False

    def fail(self, message: str, at: int | None = None) -> StreamError:
        self.col.add(self.filename, self.line_at(self.pos if at is None else at), None, message)
        return StreamError(message)

    def line_at(self, i: int) -> int:
        if i >= self.line_pos:
            self.line += self.buf.count("\n", self.line_pos, i)
        else:
            self.line -= self.buf.count("\n", i, self.line_pos)
        self.line_pos = i
        return self.line

    def _fill(self) -> bool:
        if self.eof:
            return False
        raw = self.f.read(PIECE)
        try:
            text = self._dec.decode(raw, final=not raw)
        except UnicodeDecodeError as exc:
            self.eof = True
            where = self._read_bytes + exc.start
            self.col.add(self.filename, None, None, f"not valid UTF-8 (byte offset {where})")
            raise StreamError("utf-8") from None
        self._read_bytes += len(raw)
        if not self._started:
            text = text.removeprefix("\ufeff")
            self._started = True
        if not raw:
            self.eof = True
        if self.pos > PIECE:  # drop what was consumed
            self.line_at(self.pos)
            self.buf = self.buf[self.pos:]
            self.line_pos -= self.pos
            self.pos = 0
        self.buf += text
        return bool(raw)

    def peek(self) -> str:
        while True:
            while self.pos < len(self.buf) and self.buf[self.pos] in _WS:
                self.pos += 1
            if self.pos < len(self.buf):
                return self.buf[self.pos]
            if not self._fill():
                return ""

    def expect(self, chars: str, what: str) -> str:
        c = self.peek()
        if not c or c not in chars:
            raise self.fail(f"bad JSON: expected {what}")
        self.pos += 1
        return c

    def value(self) -> tuple[int, Any]:
        """(line, value) of the next JSON value."""
        self.peek()
        while True:
            try:
                obj, end = self._json.raw_decode(self.buf, self.pos)
            except json.JSONDecodeError as exc:
                if not self.eof and len(self.buf) - self.pos < MAX_VALUE_CHARS:
                    self._fill()
                    continue
                line = self.line_at(self.pos) + self.buf.count("\n", self.pos, exc.pos)
                self.col.add(self.filename, line, None, f"bad JSON: {exc.msg}")
                raise StreamError(exc.msg) from None
            except (ValueError, RecursionError) as exc:
                why = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)
                raise self.fail(f"bad JSON: {why}") from None
            if end == len(self.buf) and not self.eof:  # a number may go on in the next piece
                self._fill()
                continue
            line = self.line_at(self.pos)
            raw = self.buf[self.pos:end]
            self.pos = end
            return line, (obj, raw)

    def array(self) -> Iterator[tuple[int, Any]]:
        """The elements of the array starting here, one at a time."""
        self.expect("[", "'['")
        if self.peek() == "]":
            self.pos += 1
            return
        while True:
            line, (obj, raw) = self.value()
            if checked(obj, self.filename, line, self.col, raw):
                yield line, obj
            if self.expect(",]", "',' or ']'") == "]":
                return

    def members(self, arrays: tuple[str, ...]) -> Iterator[tuple[str, Any]]:
        """A top-level object's members; those named in ``arrays`` yield (name, (line, element))."""
        self.expect("{", "a JSON object")
        if self.peek() == "}":
            self.pos += 1
            return
        while True:
            _, (key, _) = self.value()
            if not isinstance(key, str):
                raise self.fail("bad JSON: expected a member name")
            self.expect(":", "':'")
            if key in arrays and self.peek() == "[":
                for pair in self.array():
                    yield key, pair
            else:
                _, (value, _) = self.value()
                yield key, value
            if self.expect(",}", "',' or '}'") == "}":
                if self.peek():
                    raise self.fail("bad JSON: data after the object")
                return


def iter_jsonl_file(f: BinaryIO, filename: str, col: Collector) -> Iterator[tuple[int, Any]]:
    """JSON Lines from a binary file, line by line (lines end at b"\\n" only, as in
    ``readers.iter_jsonl``)."""
    for n, raw_b in enumerate(f, start=1):
        try:
            raw = raw_b.decode("utf-8")
        except UnicodeDecodeError as exc:
            col.add(filename, n, None, f"not valid UTF-8 (byte {exc.start} of the line)")
            continue
        if n == 1:
            raw = raw.removeprefix("\ufeff")
        raw = raw.removesuffix("\n").removesuffix("\r")
        obj = parse_line(raw, filename, n, col)
        if obj is not SKIP:
            yield n, obj
