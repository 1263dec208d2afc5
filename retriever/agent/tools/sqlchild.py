"""The SQL worker's own process (``python -m retriever.agent.tools.sqlchild DATABASE MEGABYTES``): one locked-down
read-only DuckDB connection, its memory capped by the kernel, answering the ``SqlWorkers`` of ``sqlworker`` one
query at a time over its standard input and output. A module of its own, so that the sandbox, which starts
workers, and the worker, which runs the sandbox's query, import each other in one direction only."""

from __future__ import annotations

import os
import resource
import sys
from pathlib import Path
from typing import Any

from retriever.agent.tools.results import ToolError
from retriever.agent.tools.sandbox import connect, run_select
from retriever.agent.tools.sqlworker import _cap_memory, _receive_request, _send, _spent
from retriever.errors import RetrieverError


def main(argv: list[str]) -> int:
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # nothing printed by a library can corrupt the replies
    inp = sys.stdin.buffer
    memory = int(argv[2])
    try:
        con = connect(Path(argv[1]), worker_memory_mb=memory)
    except RetrieverError as error:
        _send(out, ("failed", str(error)))
        return 1
    if hasattr(resource, "RLIMIT_AS") and os.path.exists(f"/proc/{os.getpid()}/statm"):
        _cap_memory(memory)
    _send(out, ("ready",))
    while (request := _receive_request(inp)) is not None:
        query, limits = request
        try:
            columns, types, rows = run_select(con, query, limits)
            reply: tuple[Any, ...] = ("ok", columns, types, rows)
        except ToolError as error:
            reply = ("error", str(error))
        except MemoryError:
            reply = ("error", f"the query needed more than the {memory} MB a query may use: build smaller lists")
        _send(out, (*reply, _spent()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
