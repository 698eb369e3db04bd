"""The heartbeat fast path: every worker heartbeat is decoded and answered through here."""

from __future__ import annotations

import json
from typing import Any

from actors.replies import HeartbeatResult
from supervisor.operations.declared import HeartbeatRequest
from supervisor.surfaces.socket.frame import MAX_ID, MAX_TEXT, Frame
from supervisor.wire import PROTOCOL_VERSION, encode

__all__ = ["beat_answer", "well_formed_heartbeat"]


def well_formed_heartbeat(data: Any) -> Frame | None:
    """The request ``protocol._decoded`` would return for a heartbeat with nothing to
    refuse, else None.

    Every worker heartbeat comes through here, so the checks of ``protocol._decoded`` and
    ``protocol._text`` and ``_int`` are inlined for the one op; any frame they would
    refuse (or that is not a heartbeat) is left to ``protocol._decoded``, which raises the
    proper error.
    """
    if type(data) is not dict or data.get("op") != "heartbeat":
        return None
    version = data.get("v", PROTOCOL_VERSION)
    request_id = data.get("id")
    token = data.get("token")
    args = data.get("args")
    if (
        type(version) is not int
        or version != PROTOCOL_VERSION
        or not (request_id is None or (type(request_id) is str and len(request_id) <= MAX_ID))
        or not (token is None or (type(token) is str and len(token) <= MAX_TEXT))
        or type(args) is not dict
    ):
        return None
    identity = args.get("worker_identity")
    generation = args.get("generation_id")
    pid = args.get("pid")
    epoch = args.get("fencing_epoch")
    if (
        type(identity) is not str
        or not 0 < len(identity) <= MAX_TEXT
        or identity.isspace()
        or type(generation) is not str
        or not 0 < len(generation) <= MAX_TEXT
        or generation.isspace()
        or type(pid) is not int
        or not 0 < pid < 2**63
        or type(epoch) is not int
        or not 0 <= epoch < 2**63
    ):
        return None
    return Frame(
        id=request_id,
        op="heartbeat",
        token=token,
        args=HeartbeatRequest(
            worker_identity=identity,
            pid=pid,
            generation_id=generation,
            fencing_epoch=epoch,
        ),
    )


def beat_answer(request_id: str | None, result: HeartbeatResult) -> bytes:
    """``encode(ok_frame(request_id, to_wire(result)))`` for a heartbeat, built directly:
    every heartbeat is answered through here."""
    identity, code, detail = result.worker_identity, result.code, result.detail
    stamp, ok = result.last_heartbeat_at, result.ok
    if (
        type(identity) is str
        and type(code) is str
        and type(detail) is str
        and (stamp is None or type(stamp) is str)
        and (request_id is None or type(request_id) is str)
        and type(ok) is bool
    ):
        # The encoder's own C string escaper, so the bytes are exactly the generic ones.
        return (
            f'{{"v":{PROTOCOL_VERSION},"id":{_json_text(request_id)},"ok":true,"result":'
            f'{{"ok":{"true" if ok else "false"},"code":{_ESCAPE(code)},'
            f'"detail":{_ESCAPE(detail)},"worker_identity":{_ESCAPE(identity)},'
            f'"last_heartbeat_at":{_json_text(stamp)}}}}}\n'
        ).encode()
    wire = {
        "ok": result.ok,
        "code": result.code,
        "detail": result.detail,
        "worker_identity": result.worker_identity,
        "last_heartbeat_at": result.last_heartbeat_at,
    }
    frame = {"v": PROTOCOL_VERSION, "id": request_id, "ok": True, "result": wire}
    return encode(frame)


_ESCAPE = json.encoder.encode_basestring_ascii


def _json_text(value: str | None) -> str:
    return "null" if value is None else _ESCAPE(value)
