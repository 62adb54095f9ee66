"""Between a stdio MCP server and the bot: every message the server writes passes through,
except one larger than the cap, which is dropped and answered with a size error.

Run as `python relay.py <max bytes> -- <command> <args…>` (stdlib only, by its path: the
server's working directory need not see the bot's packages). The server inherits the
relay's stdin and stderr; its stdout is read here in chunks. A message (one line of
JSON-RPC) over the cap is not buffered: its first bytes are kept to find its `id`, the rest
is read and dropped, and the bot receives instead
`{"jsonrpc": "2.0", "id": <id>, "error": {"code": -32090, "message": "… over N MB …"}}`.
So a 30 MB result costs the bot's event loop nothing, and the server stays up.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys

CHUNK = 65_536
HEAD = 4_096
"""The bytes of an oversized message kept to find its `id`."""
SIZE_ERROR = -32090
"""The JSON-RPC error code of a dropped answer (server-defined range; not the SDK's
-32000, which means the connection closed)."""
_ID = re.compile(rb'"id"\s*:\s*("(?:[^"\\]|\\.)*"|-?\d+)')


def size_error(head: bytes, max_bytes: int) -> bytes:
    """The JSON-RPC error that stands for an oversized message (its `id` from `head`)."""
    found = _ID.search(head)
    ident = json.loads(found.group(1)) if found is not None else None
    megabytes = max_bytes / (1024 * 1024)
    error = {
        "jsonrpc": "2.0",
        "id": ident,
        "error": {
            "code": SIZE_ERROR,
            "message": f"the server's answer is over {megabytes:g} MB: not read",
        },
    }
    return json.dumps(error).encode() + b"\n"


def relay(source: object, sink: object, max_bytes: int) -> None:
    """Copy `source`'s lines to `sink`, each one larger than `max_bytes` replaced by its
    size error (`source.read`, `sink.write` and `sink.flush` as binary files have them)."""
    line = bytearray()
    dropping = False
    head = b""
    while chunk := source.read1(CHUNK):  # type: ignore[attr-defined]
        start = 0
        while start < len(chunk):
            end = chunk.find(b"\n", start)
            piece = chunk[start:] if end < 0 else chunk[start:end]
            if not dropping:
                line += piece
                if len(line) > max_bytes:
                    dropping, head = True, bytes(line[:HEAD])
                    line.clear()
            if end < 0:
                break
            if dropping:
                sink.write(size_error(head, max_bytes))  # type: ignore[attr-defined]
                dropping = False
            else:
                sink.write(bytes(line) + b"\n")  # type: ignore[attr-defined]
                line.clear()
            sink.flush()  # type: ignore[attr-defined]
            start = end + 1
    if line and not dropping:
        sink.write(bytes(line))  # type: ignore[attr-defined]
        sink.flush()  # type: ignore[attr-defined]


def main() -> int:
    max_bytes = int(sys.argv[1])
    command = sys.argv[3:]
    server = subprocess.Popen(command, stdout=subprocess.PIPE)
    assert server.stdout is not None
    try:
        relay(server.stdout, sys.stdout.buffer, max_bytes)
    except BrokenPipeError:  # the bot went away
        server.terminate()
    return server.wait()


if __name__ == "__main__":
    sys.exit(main())
