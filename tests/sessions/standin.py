"""A loopback stand-in for the model APIs that Claude Code, Codex CLI and Gemini CLI call.

Standard library only. It serves the three wire formats on one port:

- Anthropic Messages (``POST /v1/messages``, server-sent events or one JSON answer);
- OpenAI Responses (``POST /v1/responses``, server-sent events);
- Gemini (``POST /v1beta/models/M:streamGenerateContent`` and ``:generateContent``).

Each turn it drives a script: for every server named in ``--call SERVER=TOOL:JSON``, one
call of that MCP tool, in order, as soon as the client offers the tool; then a final text
answer ends the turn. Claude Code may offer MCP tools only behind its ``ToolSearch`` tool:
the stand-in then searches for the tool first. Gemini's side requests that ask for JSON
(routing, next speaker) get JSON. ``--hold-final PATH`` holds the answer that would
end the turn until PATH exists (the client is killed mid-turn, or let go). Every request
is appended to ``--log`` as one JSON line: the API, the tool names offered, the step
answered.
"""

from __future__ import annotations

import argparse
import json
import re
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

__all__ = ["FINAL_TEXT", "Script", "ToolCall", "main", "parse_call", "serve"]

#: The text of the answer that ends a turn.
FINAL_TEXT = "All servers answered."
#: Longest a held request waits; the test kills the client long before.
HOLD_SECONDS = 300.0


@dataclass(frozen=True, slots=True)
class ToolCall:
    server: str
    tool: str
    arguments: Mapping[str, Any]


@dataclass(slots=True)
class Script:
    calls: tuple[ToolCall, ...]
    log: Path | None = None
    #: The answer that would end the turn waits until this file exists (None: never
    #: waits); a test kills the client meanwhile, or makes the file to let it finish.
    hold_final: Path | None = None
    requests: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, entry: Mapping[str, Any]) -> int:
        with self.lock:
            self.requests += 1
            number = self.requests
            if self.log is not None:
                with self.log.open("a", encoding="utf-8") as handle:
                    handle.write(json.dumps({"n": number, "t": time.time(), **entry}) + "\n")
        return number


def _offered(names: Sequence[str], call: ToolCall) -> str | None:
    """The name the client gave ``call``'s tool: clients prefix MCP tools their own way
    (``mcp__stub__echo``, ``stub__echo``, ``mcp_stub_echo``, or the bare name)."""
    for name in names:
        if name == call.tool or (call.server in name and name.endswith(call.tool)):
            return name
    return None


def _hold(script: Script) -> None:
    """Before the answer that ends the turn: wait for the release file, if one is set."""
    if script.hold_final is None:
        return
    script.record({"api": "held"})
    deadline = time.monotonic() + HOLD_SECONDS
    while not script.hold_final.exists() and time.monotonic() < deadline:
        time.sleep(0.05)


def _next_step(
    names: Sequence[str], done: set[str], script: Script
) -> tuple[str, str, dict[str, Any]] | None:
    """The next (kind, tool name, arguments) the turn asks for, or None to end it.

    ``done`` holds ``server/tool`` for each call whose result the conversation holds,
    and ``search:server/tool`` for each tool search answered (each API marks results
    its own way; the adapters read them).
    """
    for call in script.calls:
        marker = f"{call.server}/{call.tool}"
        if marker in done:
            continue
        name = _offered(names, call)
        if name is not None:
            return ("call", name, {**call.arguments})
        if "ToolSearch" in names and f"search:{marker}" not in done:
            return ("search", "ToolSearch", {"query": f"select:mcp__{call.server}__{call.tool}"})
        return None  # the client does not offer it: nothing more can be asked for
    return None


# ------------------------------------------------------------------------ Anthropic


def _sse(event: str | None, data: Mapping[str, Any]) -> bytes:
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {json.dumps(data)}\n\n".encode()


def _anthropic_done(body: Mapping[str, Any], script: Script) -> set[str]:
    """Which calls have results: a tool_result answers the tool_use of the same id."""
    uses: dict[str, str] = {}
    finished = set()
    for message in body.get("messages", []):
        content = message.get("content")
        if not isinstance(content, list):
            continue
        for block in content:
            if block.get("type") == "tool_use":
                uses[block.get("id", "")] = str(block.get("name", ""))
                if block.get("name") == "ToolSearch":
                    finished.add(f"search:{_query_marker(block.get('input', {}))}")
            elif block.get("type") == "tool_result":
                finished.add(_marker_of(uses.get(block.get("tool_use_id", ""), ""), script))
    return finished


def _query_marker(arguments: Mapping[str, Any]) -> str:
    match = re.search(r"mcp__(.+?)__(.+)$", str(arguments.get("query", "")))
    return f"{match.group(1)}/{match.group(2)}" if match else ""


def _marker_of(name: str, script: Script) -> str:
    for call in script.calls:
        if _offered([name], call) is not None:
            return f"{call.server}/{call.tool}"
    return ""


def _anthropic(body: Mapping[str, Any], script: Script) -> Iterator[bytes]:
    names = _tool_names(body.get("tools"))
    step = _next_step(names, _anthropic_done(body, script), script)
    script.record({"api": "anthropic", "tools": names, "step": step})
    if step is None:
        _hold(script)
    message = {
        "id": f"msg_{script.requests}",
        "type": "message",
        "role": "assistant",
        "model": body.get("model", "stand-in"),
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": 1, "output_tokens": 1},
    }
    if step is None:
        block: dict[str, Any] = {"type": "text", "text": ""}
        delta: dict[str, Any] = {"type": "text_delta", "text": FINAL_TEXT}
        stop = "end_turn"
    else:
        block = {"type": "tool_use", "id": f"toolu_{script.requests}", "name": step[1], "input": {}}
        delta = {"type": "input_json_delta", "partial_json": json.dumps(step[2])}
        stop = "tool_use"
    if not body.get("stream"):
        content = (
            {"type": "text", "text": FINAL_TEXT} if step is None else {**block, "input": step[2]}
        )
        yield json.dumps({**message, "content": [content], "stop_reason": stop}).encode()
        return
    yield _sse("message_start", {"type": "message_start", "message": message})
    yield _sse("content_block_start", {"type": "content_block_start", "index": 0,
                                       "content_block": block})  # fmt: skip
    yield _sse("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta})
    yield _sse("content_block_stop", {"type": "content_block_stop", "index": 0})
    yield _sse("message_delta", {"type": "message_delta",
                                 "delta": {"stop_reason": stop, "stop_sequence": None},
                                 "usage": {"output_tokens": 1}})  # fmt: skip
    yield _sse("message_stop", {"type": "message_stop"})


# ------------------------------------------------------------------------ OpenAI Responses


def _responses_done(body: Mapping[str, Any], script: Script) -> set[str]:
    calls: dict[str, str] = {}
    finished = set()
    items = body.get("input", [])
    for item in items if isinstance(items, list) else []:
        if not isinstance(item, dict):
            continue
        if item.get("type") == "function_call":
            name = str(item.get("name", ""))
            if item.get("namespace"):
                name = f"{item['namespace']}/{name}"
            calls[str(item.get("call_id", ""))] = name
        elif item.get("type") == "function_call_output":
            finished.add(_marker_of(calls.get(str(item.get("call_id", "")), ""), script))
    return finished


def _tool_names(tools: Any) -> list[str]:
    """Tool names of a Responses or Messages ``tools`` list (namespaced ones included)."""
    names = []
    for tool in tools if isinstance(tools, list) else []:
        if not isinstance(tool, dict):
            continue
        if tool.get("type") == "namespace":
            # Codex offers each MCP server as a namespace of its tools.
            names += [f"{tool.get('name')}/{t.get('name')}" for t in tool.get("tools", [])]
        elif isinstance(tool.get("name"), str):
            names.append(tool["name"])
        elif isinstance(tool.get("function"), dict):
            names.append(str(tool["function"].get("name", "")))
    return names


def _responses(body: Mapping[str, Any], script: Script) -> Iterator[bytes]:
    names = _tool_names(body.get("tools"))
    step = _next_step(names, _responses_done(body, script), script)
    number = script.record({"api": "responses", "tools": names, "step": step})
    if step is None:
        _hold(script)
    rid = f"resp_{number}"
    yield _sse("response.created", {"type": "response.created", "response": {"id": rid}})
    if step is None:
        item: dict[str, Any] = {
            "type": "message",
            "role": "assistant",
            "id": f"msg_{number}",
            "content": [{"type": "output_text", "text": FINAL_TEXT}],
        }
    else:
        namespace, _, name = step[1].rpartition("/")
        item = {
            "type": "function_call",
            "id": f"fc_{number}",
            "call_id": f"call_{number}",
            "name": name,
            "arguments": json.dumps(step[2]),
            **({"namespace": namespace} if namespace else {}),
        }
    yield _sse("response.output_item.done", {"type": "response.output_item.done", "item": item})
    usage = {"input_tokens": 1, "output_tokens": 1, "total_tokens": 2,
             "input_tokens_details": None, "output_tokens_details": None}  # fmt: skip
    completed = {"id": rid, "usage": usage}
    yield _sse("response.completed", {"type": "response.completed", "response": completed})


# ------------------------------------------------------------------------ Gemini


def _gemini_done(body: Mapping[str, Any], script: Script) -> set[str]:
    finished = set()
    for content in body.get("contents", []) or []:
        for part in content.get("parts", []) or [] if isinstance(content, dict) else []:
            response = part.get("functionResponse") if isinstance(part, dict) else None
            if isinstance(response, dict):
                finished.add(_marker_of(str(response.get("name", "")), script))
    return finished


def _filled(schema: Any) -> Any:
    """A value of a JSON schema: what a side request (routing, next speaker) asks for.
    Where an enum offers ``user`` it is taken: the model hands the turn back."""
    if not isinstance(schema, dict):
        return None
    if "enum" in schema:
        options = list(schema["enum"])
        return "user" if "user" in options else options[0]
    kind = str(schema.get("type", "object")).lower()
    if kind == "object":
        return {k: _filled(v) for k, v in (schema.get("properties") or {}).items()}
    if kind in ("integer", "number"):
        return schema.get("minimum", 1)
    return {"string": "stand-in", "boolean": False, "array": []}.get(kind)


def _gemini(body: Mapping[str, Any], script: Script, stream: bool) -> Iterator[bytes]:
    config = body.get("generationConfig") or {}
    names = [
        str(f.get("name", ""))
        for tool in body.get("tools", []) or []
        for f in (tool.get("functionDeclarations") or [] if isinstance(tool, dict) else [])
    ]
    if config.get("responseMimeType") == "application/json":
        schema = config.get("responseJsonSchema") or config.get("responseSchema")
        script.record({"api": "gemini-json", "schema": schema})
        parts: list[dict[str, Any]] = [{"text": json.dumps(_filled(schema))}]
    else:
        step = _next_step(names, _gemini_done(body, script), script)
        script.record({"api": "gemini", "tools": names, "step": step})
        if step is None:
            _hold(script)
            parts = [{"text": FINAL_TEXT}]
        else:
            parts = [{"functionCall": {"name": step[1], "args": step[2]}}]
    answer = {
        "candidates": [
            {"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}
        ],
        "usageMetadata": {"promptTokenCount": 1, "candidatesTokenCount": 1,
                          "totalTokenCount": 2},
        "modelVersion": "stand-in",
    }  # fmt: skip
    yield (f"data: {json.dumps(answer)}\r\n\r\n" if stream else json.dumps(answer)).encode()


# ------------------------------------------------------------------------ the server


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    script: Script

    def log_message(self, format: str, *args: Any) -> None:
        pass  # the script's log is the record

    def do_GET(self) -> None:
        self.script.record({"api": "get", "path": self.path})
        self._send(404, "application/json", [b'{"error": "not served"}'])

    def do_HEAD(self) -> None:
        self._send(200, "text/plain", [])

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = {}
        script = self.script
        path = self.path.split("?", 1)[0]
        if path.endswith("/messages"):
            kind = "text/event-stream" if body.get("stream") else "application/json"
            self._send(200, kind, _anthropic(body, script))
        elif path.endswith("/responses"):
            self._send(200, "text/event-stream", _responses(body, script))
        elif path.endswith(":streamGenerateContent"):
            self._send(200, "text/event-stream", _gemini(body, script, stream=True))
        elif path.endswith(":generateContent"):
            self._send(200, "application/json", _gemini(body, script, stream=False))
        elif path.endswith(":countTokens"):
            self._send(200, "application/json", [b'{"totalTokens": 1}'])
        elif path.endswith("/messages/count_tokens"):
            self._send(200, "application/json", [b'{"input_tokens": 1}'])
        else:
            script.record({"api": "unknown", "path": self.path})
            self._send(404, "application/json", [b'{"error": "not served"}'])

    def _send(self, status: int, kind: str, chunks: Iterator[bytes] | Sequence[bytes]) -> None:
        data = b"".join(chunks)
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(data)
        self.close_connection = True


def serve(script: Script, port: int) -> ThreadingHTTPServer:
    """Serve ``script`` on 127.0.0.1:``port`` from a daemon thread; returns the server."""
    handler = type("Handler", (_Handler,), {"script": script})
    server = ThreadingHTTPServer(("127.0.0.1", port), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def parse_call(text: str) -> ToolCall:
    """``SERVER=TOOL:JSON`` as a ToolCall (the command-line form of one scripted call)."""
    server, _, rest = text.partition("=")
    tool, _, arguments = rest.partition(":")
    return ToolCall(server, tool, json.loads(arguments or "{}"))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--log", type=Path)
    parser.add_argument("--call", action="append", default=[], type=parse_call)
    parser.add_argument("--hold-final", type=Path)
    parser.add_argument("--seconds", type=float, default=HOLD_SECONDS)
    args = parser.parse_args(argv)
    serve(Script(tuple(args.call), args.log, args.hold_final), args.port)
    time.sleep(args.seconds)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
