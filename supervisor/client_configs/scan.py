"""A span-recording reader for JSON (with comments and trailing commas) and TOML arrays."""

# The editors change a few values of a config file and leave every other character
# alone, so they need to know where each value's text starts and ends. This reader
# parses JSON (and the JSONC that VS Code and Gemini accept: // and /* */ comments,
# trailing commas) into a tree of nodes that keep their character spans, and reads one
# TOML array of strings the same way. Values are decoded with json/tomllib rules.

from __future__ import annotations

import json
import re
import tomllib
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Node", "ScanError", "match_toml_string", "parse_json", "scan_toml_array"]


class ScanError(ValueError):
    """The text is not valid JSON (or not a TOML array); ``offset`` is where it went wrong."""

    def __init__(self, message: str, text: str, offset: int) -> None:
        line = text.count("\n", 0, offset) + 1
        column = offset - (text.rfind("\n", 0, offset) + 1) + 1
        super().__init__(f"{message} at line {line} column {column}")
        self.offset = offset


# Not frozen: the parser fills a container's members and end as it reads them.
@dataclass(slots=True)
class Node:
    """A value with its text span ``[start, end)``; objects keep member spans in order."""

    kind: str  # object, array, string, scalar
    start: int
    end: int
    value: Any = None
    #: object: (key, key start, value node) in file order; array: the element nodes.
    members: list[tuple[str, int, Node]] = field(default_factory=list)
    items: list[Node] = field(default_factory=list)

    def get(self, key: str) -> Node | None:
        """The last member named ``key`` (as json.loads keeps the last duplicate)."""
        found = None
        for name, _, node in self.members:
            if name == key:
                found = node
        return found


_JSON_STRING = re.compile(r'"(?:[^"\\\x00-\x1f]|\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4}))*"')
_JSON_SCALAR = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?|true|false|null")


class _Json:
    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def fail(self, message: str) -> ScanError:
        return ScanError(message, self.text, self.pos)

    def skip(self) -> None:
        text = self.text
        while self.pos < len(text):
            char = text[self.pos]
            if char in " \t\r\n\ufeff":
                self.pos += 1
            elif text.startswith("//", self.pos):
                newline = text.find("\n", self.pos)
                self.pos = len(text) if newline < 0 else newline
            elif text.startswith("/*", self.pos):
                close = text.find("*/", self.pos + 2)
                if close < 0:
                    raise self.fail("unterminated comment")
                self.pos = close + 2
            else:
                return

    def value(self, depth: int = 0) -> Node:
        if depth > 200:
            raise self.fail("nested too deeply")
        self.skip()
        start = self.pos
        char = self.text[start : start + 1]
        if char == "{":
            return self.container(start, "}", depth)
        if char == "[":
            return self.container(start, "]", depth)
        if char == '"':
            match = _JSON_STRING.match(self.text, start)
            if match is None:
                raise self.fail("bad string")
            self.pos = match.end()
            return Node("string", start, self.pos, json.loads(match.group()))
        match = _JSON_SCALAR.match(self.text, start)
        if match is None or not match.group():
            raise self.fail("expected a value")
        self.pos = match.end()
        return Node("scalar", start, self.pos, json.loads(match.group()))

    def container(self, start: int, close: str, depth: int) -> Node:
        node = Node("object" if close == "}" else "array", start, start)
        self.pos += 1
        while True:
            self.skip()
            if self.text.startswith(close, self.pos):
                break
            if node.kind == "object":
                key_start = self.pos
                key = self.value(depth + 1)
                if key.kind != "string":
                    self.pos = key_start
                    raise self.fail("expected a member name")
                self.skip()
                if not self.text.startswith(":", self.pos):
                    raise self.fail("expected ':'")
                self.pos += 1
                node.members.append((key.value, key_start, self.value(depth + 1)))
            else:
                node.items.append(self.value(depth + 1))
            self.skip()
            if self.text.startswith(",", self.pos):
                self.pos += 1
            elif not self.text.startswith(close, self.pos):
                raise self.fail(f"expected ',' or {close!r}")
        self.pos += 1
        node.end = self.pos
        if node.kind == "object":
            node.value = {name: member.value for name, _, member in node.members}
        else:
            node.value = [item.value for item in node.items]
        return node


def parse_json(text: str) -> Node:
    """The document's root node; ScanError for anything that is not one JSON value."""
    parser = _Json(text)
    root = parser.value()
    parser.skip()
    if parser.pos != len(text):
        raise parser.fail("extra text after the document")
    return root


_TOML_STRINGS = (
    re.compile(r'"""(?:[^\\]|\\.|\\\n)*?"""(?!")', re.DOTALL),
    re.compile(r"'''.*?'''(?!')", re.DOTALL),
    re.compile(r'"(?:[^"\\\n]|\\.)*"'),
    re.compile(r"'[^'\n]*'"),
)


def match_toml_string(text: str, pos: int) -> re.Match[str] | None:
    """The TOML string token (any of the four kinds) starting at ``pos``, if one does."""
    return next((m for p in _TOML_STRINGS if (m := p.match(text, pos)) is not None), None)


def _toml_skip(text: str, pos: int) -> int:
    while pos < len(text):
        if text[pos] in " \t\r\n":
            pos += 1
        elif text[pos] == "#":
            newline = text.find("\n", pos)
            pos = len(text) if newline < 0 else newline
        else:
            break
    return pos


def scan_toml_array(text: str, start: int) -> Node:
    """The TOML array of strings whose ``[`` is at ``start``, element spans included.

    Values are decoded by tomllib (one element at a time), so escapes mean what TOML
    says; anything but a string element is a ScanError (the caller reports it).
    """
    if not text.startswith("[", start):
        raise ScanError("expected '['", text, start)
    node = Node("array", start, start)
    pos = start + 1
    while True:
        pos = _toml_skip(text, pos)
        if text.startswith("]", pos):
            break
        match = match_toml_string(text, pos)
        if match is None:
            raise ScanError("expected a string element", text, pos)
        value = tomllib.loads(f"v = {match.group()}")["v"]
        node.items.append(Node("string", pos, match.end(), value))
        pos = _toml_skip(text, match.end())
        if text.startswith(",", pos):
            pos += 1
        elif not text.startswith("]", pos):
            raise ScanError("expected ',' or ']'", text, pos)
    node.end = pos + 1
    node.value = [item.value for item in node.items]
    return node
