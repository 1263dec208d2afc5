"""The address a running ``vault2okf serve`` leaves in each bundle it serves: ``BUNDLE/.vault2okf/serve.json``
(host, port, pid, answerer, generation) and, with ``--token``, the token in ``serve-token`` (mode 0600: readable
by the user only), so `vault2okf search` and `ask` can go through it. Standard library only: the CLI reads it
before it imports anything heavy. An address whose pid is dead is stale and ignored (a refused connection is
the client's to detect)."""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from vault2okf.protocol.lock import process_alive

STATE = ".vault2okf"
ADDRESS = "serve.json"
TOKEN = "serve-token"


@dataclass(frozen=True)
class Address:
    host: str
    port: int
    pid: int
    answer: dict[str, Any]  # the answerer's spec (AnswerSpec's fields): a CLI asking otherwise runs in process
    notice: str | None = None  # what the answerer says of itself (the tiny packaged model is in use)
    generation: str = ""
    name: str = ""  # the bundle's name on this server (requests name it: the server may serve several)
    token: str | None = None  # read from serve-token, never written into serve.json

    @property
    def url(self) -> str:
        host = "127.0.0.1" if self.host in ("0.0.0.0", "") else ("[::1]" if self.host in ("::", "[::]") else self.host)
        if ":" in host and not host.startswith("["):
            host = f"[{host}]"
        return f"http://{host}:{self.port}"


def write_address(bundle: Path, address: Address, token: str | None, generation: str, name: str) -> bool:
    """Leave ``address`` in ``bundle``'s state folder; False when it cannot be written (the CLI then runs in
    process: nothing else depends on it)."""
    state = Path(bundle) / STATE
    record = {**asdict(address), "generation": generation, "name": name, "token": None,
              "token_file": TOKEN if token else None}  # fmt: skip
    try:
        state.mkdir(exist_ok=True)
        if token:
            path = state / TOKEN
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as f:
                f.write(token)
        tmp = state / f".{ADDRESS}.{os.getpid()}"
        tmp.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
        tmp.replace(state / ADDRESS)
    except OSError:
        return False
    return True


def read_address(bundle: Path) -> Address | None:
    """The address of a server running now for ``bundle``; None when there is none, it is unreadable, or its pid
    is dead (a server killed without cleaning up)."""
    state = Path(bundle) / STATE
    try:
        record = json.loads((state / ADDRESS).read_text(encoding="utf-8"))
        fields = (record.get("notice"), str(record.get("generation", "")), str(record.get("name", "")))
        address = Address(str(record["host"]), int(record["port"]), int(record["pid"]), dict(record["answer"]), *fields)
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not process_alive(address.pid):
        return None
    if record.get("token_file"):
        try:
            token = (state / TOKEN).read_text(encoding="utf-8").strip()
        except OSError:
            return None  # another user's server: its token is not ours to read
        address = Address(**{**asdict(address), "token": token})
    return address


def remove_address(bundle: Path, pid: int) -> None:
    """Remove the address (and token) this server left, not one a later server wrote."""
    state = Path(bundle) / STATE
    try:
        record = json.loads((state / ADDRESS).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return
    if record.get("pid") != pid:
        return
    for name in (ADDRESS, TOKEN):
        with contextlib.suppress(OSError):
            (state / name).unlink()
