"""The Starlette app of ``vault2okf serve`` (docs/API.md): JSON routes, ``/ask`` as server-sent events, MCP over
streamable HTTP at ``/mcp``, the web page at ``/``; and ``serve()``, which runs it under uvicorn.

Safety, in ``Guard`` (a plain ASGI middleware in front of every route, MCP included): the Host header must name
this server (loopback names, or the ``--host`` given) at its port, and an Origin, when sent, must be its own or
Obsidian's (``app://obsidian.md``), else 403 (DNS rebinding); with a token, every request needs it (401); a body
over ``MAX_BODY`` is refused (413) before it is read whole. Work runs in a thread pool, each request under a time
limit (504); an SSE client that goes away stops its answer at the next token. Every error is ``{"error": ...}``.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import ipaddress
import json
import os
import socket
import threading
import time
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

from retriever.answer.backends import AnswerSpec, Backend
from retriever.asker import Asker
from retriever.errors import RetrieverError
from retriever.serve import ServeError
from retriever.serve.library import BadRequest, Library, NotFound, Served
from retriever.serve.views import links_json, note_json, read_query, search_json, vault_name

VERSION = "0.1.0"
MAX_BODY = 64 * 1024
OBSIDIAN_ORIGIN = "app://obsidian.md"
WEB = {"/": ("index.html", "text/html; charset=utf-8"), "/app.js": ("app.js", "text/javascript; charset=utf-8"),
       "/app.css": ("app.css", "text/css; charset=utf-8")}  # fmt: skip


@dataclass(frozen=True)
class ServeSpec:
    """How to serve: where, with which token, which answerer, and the limits of one request."""

    host: str = "127.0.0.1"
    port: int = 8765
    token: str | None = None
    answer: AnswerSpec = field(default_factory=lambda: AnswerSpec.of(Backend.EXTRACT))
    time_limit: float = 120.0  # seconds, per request
    workers: int = 32
    allow_hosts: tuple[str, ...] = ()  # more Host names this server answers to (behind a proxy or tunnel), any port

    def check(self) -> None:
        """ServeError for an address that is not loopback without a token (anyone on the network could ask)."""
        if not is_loopback(self.host) and not self.token:
            raise ServeError(
                f"--host {self.host} is not a loopback address: anyone who can reach it could read the vault; "
                "add --token T (clients then send Authorization: Bearer T), or serve on 127.0.0.1"
            )
        if self.allow_hosts and not self.token:
            raise ServeError(
                f"--allow-host {self.allow_hosts[0]} lets requests through a tunnel or proxy reach the vault: "
                "add --token T (clients then send Authorization: Bearer T)"
            )


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


class Service:
    """What the routes share: the bundles, the answerer (loaded once), the thread pool and the limits."""

    def __init__(self, library: Library, spec: ServeSpec) -> None:
        self.library = library
        self.spec = spec
        answerer = spec.answer.answerer()
        # one model answers one question at a time (llama.cpp's context is not shared); extract has no model
        self.answerer = answerer if spec.answer.llm == Backend.EXTRACT else OneAtATime(answerer)
        self.pool = ThreadPoolExecutor(max_workers=spec.workers, thread_name_prefix="serve")
        self.port = spec.port

    async def run(self, fn: Callable[[], Any]) -> Any:
        """``fn()`` in the pool, under the time limit (504 past it; the thread finishes on its own)."""
        future = asyncio.get_running_loop().run_in_executor(self.pool, fn)
        try:
            return await asyncio.wait_for(future, self.spec.time_limit)
        except TimeoutError:
            raise TimedOut(f"the request took over {self.spec.time_limit:g} s: ask something narrower") from None

    def answer(self, served: Served, question: str, spec: Any, **callbacks: Any) -> Any:
        snapshot = served.current()
        retriever = snapshot.retriever
        if retriever is None:
            raise Unavailable(f"{served.name} cannot be searched: {snapshot.error or 'it has no index'}")
        return Asker(retriever, spec, answerer=self.answerer).ask(question, **callbacks)

    def health(self) -> dict[str, Any]:
        bundles = [served.describe() for served in self.library.bundles.values()]
        embedders = {e for served in self.library.bundles.values() if (e := served.embedder())}
        answerer = getattr(self.answerer, "model", None) or str(self.spec.answer.llm)
        return {"status": "ok", "version": VERSION, "bundles": bundles,
                "models": {"embedder": ", ".join(sorted(embedders)) or None, "answerer": answerer}}  # fmt: skip


class OneAtATime:
    """An answerer whose ``answer`` runs one call at a time; retrieval (and the ``sources`` event) does not wait."""

    def __init__(self, answerer: Any) -> None:
        self._answerer = answerer
        self._lock = threading.Lock()

    def answer(self, *args: Any, **kwargs: Any) -> Any:
        with self._lock:
            return self._answerer.answer(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._answerer, name)


class TimedOut(ServeError):
    """504."""


class Unavailable(ServeError):
    """503: the bundle has no usable index now."""


def status_of(error: Exception) -> int:
    for kind, code in ((BadRequest, 400), (NotFound, 404), (TimedOut, 504), (Unavailable, 503)):
        if isinstance(error, kind):
            return code
    return 400 if isinstance(error, RetrieverError) else 500


def one_line(error: Exception) -> str:
    text = " ".join(str(error).split()) or type(error).__name__
    return text if isinstance(error, RetrieverError) else f"internal error ({type(error).__name__}): {text}"


def build_app(service: Service, *, base_url: str) -> Any:
    """The Starlette app over ``service``, behind ``Guard``."""
    from mcp.server.transport_security import TransportSecuritySettings
    from starlette.applications import Starlette
    from starlette.exceptions import HTTPException
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response, StreamingResponse
    from starlette.routing import Route

    from retriever.serve.connector import build_mcp
    from retriever.serve.openapi import openapi

    library = service.library

    async def health(request: Request) -> Response:
        return JSONResponse(await service.run(service.health))

    async def search(request: Request) -> Response:
        query = read_query(await body_json(request))
        served = library.get(query.bundle)

        def run() -> dict[str, Any]:
            snapshot = served.current()
            if snapshot.retriever is None:
                raise Unavailable(f"{served.name} cannot be searched: {snapshot.error or 'it has no index'}")
            retrieval = snapshot.retriever.search(query.question, query.spec)
            explained = None
            if query.explain is not None:
                from retriever.explain import explain

                explained = explain(snapshot.retriever, query.question, query.spec, query.explain).to_json()
            return search_json(query, served.name, retrieval, vault_name(served), snapshot.notices, explained)

        return JSONResponse(await service.run(run))

    async def ask(request: Request) -> Response:
        query = read_query(await body_json(request))
        served = library.get(query.bundle)
        if "text/event-stream" in request.headers.get("accept", ""):
            return StreamingResponse(ask_events(service, served, query), media_type="text/event-stream",
                                     headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"})  # fmt: skip
        started = time.perf_counter()
        result = await service.run(lambda: service.answer(served, query.question, query.spec, started=started))
        return JSONResponse(result.to_json())

    async def notes(request: Request) -> Response:
        served = library.get(request.query_params.get("bundle"))
        note = request.path_params["note_id"]
        return JSONResponse(await service.run(lambda: note_json(served, note)))

    async def related(request: Request) -> Response:
        from retriever.serve.related import related_json

        served = library.get(request.query_params.get("bundle"))
        k = request.query_params.get("k", "10")
        if not k.isdigit() or not 1 <= int(k) <= 50:
            raise BadRequest("k must be an integer from 1 to 50")
        note = request.path_params["note_id"]
        return JSONResponse(await service.run(lambda: related_json(served, note, int(k))))

    async def links(request: Request) -> Response:
        served = library.get(request.query_params.get("bundle"))
        return JSONResponse(await service.run(lambda: links_json(served, request.query_params.get("note"))))

    async def openapi_json(request: Request) -> Response:
        return JSONResponse(openapi(VERSION))

    async def page(request: Request) -> Response:
        name, media = WEB[request.url.path]
        text = resources.files("retriever.serve").joinpath("web", name).read_text(encoding="utf-8")
        return Response(text, media_type=media, headers={"Cache-Control": "no-store"})

    async def on_error(request: Request, exc: Exception) -> Response:
        if isinstance(exc, HTTPException):
            return JSONResponse({"error": exc.detail or "error"}, status_code=exc.status_code)
        return JSONResponse({"error": one_line(exc)}, status_code=status_of(exc))

    mcp = build_mcp(library, base_url)
    mcp_app = mcp.streamable_http_app(
        streamable_http_path="/mcp",
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),  # Guard checks
    )
    routes = [
        Route("/health", health, methods=["GET"]),
        Route("/search", search, methods=["POST"]),
        Route("/ask", ask, methods=["POST"]),
        Route("/notes/{note_id:path}", notes, methods=["GET"]),
        Route("/related/{note_id:path}", related, methods=["GET"]),
        Route("/links", links, methods=["GET"]),
        Route("/openapi.json", openapi_json, methods=["GET"]),
        *(Route(path, page, methods=["GET"]) for path in WEB),
        *mcp_app.routes,
    ]

    @contextlib.asynccontextmanager
    async def lifespan(app: Any) -> AsyncIterator[None]:
        async with mcp.session_manager.run():
            yield
        service.pool.shutdown(wait=False, cancel_futures=True)

    handlers: dict[Any, Any] = {HTTPException: on_error, Exception: on_error, RetrieverError: on_error}
    app = Starlette(routes=routes, exception_handlers=handlers, lifespan=lifespan)
    return Guard(app, service)


async def body_json(request: Any) -> Any:
    raw = await request.body()
    try:
        return json.loads(raw or b"null")
    except ValueError:
        raise BadRequest("the body is not JSON: send Content-Type: application/json and a JSON object") from None


def sse(event: str, data: Any) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n".encode()


class Disconnected(Exception):
    """The SSE client went away: the answer stops at its next token."""


async def ask_events(service: Service, served: Served, query: Any) -> AsyncIterator[bytes]:
    """`/ask` as events: ``sources`` when retrieval ends, ``token``s, then ``done`` (or ``error``, then the end).
    The answer runs in the pool and hands each event to this coroutine through an asyncio queue."""
    from retriever.serve.views import hit_json

    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[bytes | None] = asyncio.Queue()
    gone = threading.Event()
    started = time.perf_counter()
    vault = vault_name(served)

    def put(item: bytes | None) -> None:
        loop.call_soon_threadsafe(queue.put_nowait, item)

    def on_token(text: str) -> None:
        if gone.is_set():
            raise Disconnected
        put(sse("token", {"text": text}))

    def work() -> None:
        try:
            result = service.answer(
                served, query.question, query.spec, started=started, on_token=on_token,
                on_retrieved=lambda r: put(sse("sources", {"hits": [hit_json(h, vault) for h in r.hits]})),
            )  # fmt: skip
            put(sse("done", result.to_json()))
        except Disconnected:
            pass
        except Exception as e:  # every failure is an error event, never a traceback
            put(sse("error", {"error": one_line(e)}))
        finally:
            put(None)

    future = loop.run_in_executor(service.pool, work)
    deadline = loop.time() + service.spec.time_limit
    try:
        while True:
            try:
                item = await asyncio.wait_for(queue.get(), max(deadline - loop.time(), 0))
            except TimeoutError:
                gone.set()
                yield sse("error", {"error": f"the answer took over {service.spec.time_limit:g} s"})
                return
            if item is None:
                return
            yield item
    finally:
        gone.set()  # a client that left (or a finished stream): no more tokens are made for it
        del future


class Guard:
    """Host/Origin checks, the bearer token, CORS for Obsidian, the body cap; errors as JSON."""

    def __init__(self, app: Any, service: Service) -> None:
        self.app = app
        self.service = service
        self.token = service.spec.token
        self.names = {"127.0.0.1", "localhost", "[::1]", service.spec.host.lower()}
        self.proxied = {h.lower() for h in service.spec.allow_hosts}

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        port = (scope.get("server") or (None, self.service.port))[1]
        origin = headers.get("origin")
        cors = {"access-control-allow-origin": OBSIDIAN_ORIGIN, "vary": "Origin"} if origin == OBSIDIAN_ORIGIN else {}
        host = headers.get("host", "")
        if not self._host_ok(host, port):
            await reply(send, 403, f"Host {host!r} is not this server's: refused (DNS rebinding protection)")
            return
        if origin is not None and not self._origin_ok(origin, port):
            await reply(send, 403, f"Origin {origin!r} is not this server's: refused (DNS rebinding protection)")
            return
        if scope["method"] == "OPTIONS" and "access-control-request-method" in headers:
            await preflight(send, cors)
            return
        if self.token and not hmac.compare_digest(headers.get("authorization", ""), f"Bearer {self.token}"):
            await reply(send, 401, "missing or wrong token", cors)
            return
        if scope["method"] in ("POST", "PUT", "PATCH"):
            if int(headers.get("content-length") or 0) > MAX_BODY:
                await reply(send, 413, f"the body is over {MAX_BODY} bytes", cors)
                return
            body = await read_capped(receive)
            if body is None:
                await reply(send, 413, f"the body is over {MAX_BODY} bytes", cors)
                return
            receive = replay(body, receive)
        await self.app(scope, receive, with_headers(send, cors))

    def _host_ok(self, host: str, port: int) -> bool:
        name, _, given = host.lower().rpartition(":") if not host.endswith("]") else (host.lower(), "", "")
        if host.lower() in self.proxied or name in self.proxied:
            return True
        return name in self.names and given == str(port)

    def _origin_ok(self, origin: str, port: int) -> bool:
        if origin == OBSIDIAN_ORIGIN:
            return True
        scheme, _, rest = origin.partition("://")
        return scheme in ("http", "https") and self._host_ok(rest.rstrip("/"), port)


async def read_capped(receive: Any) -> bytes | None:
    """The request body, or None once it passes ``MAX_BODY``."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return b"".join(chunks)
        size += len(message.get("body", b""))
        if size > MAX_BODY:
            return None
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
            return b"".join(chunks)


def replay(body: bytes, receive: Any) -> Any:
    sent = False

    async def again() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return dict(await receive())

    return again


def with_headers(send: Any, extra: dict[str, str]) -> Any:
    if not extra:
        return send

    async def sending(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            message = {**message, "headers": [*message.get("headers", []), *_encode(extra)]}
        await send(message)

    return sending


def _encode(headers: dict[str, str]) -> list[tuple[bytes, bytes]]:
    return [(k.encode("latin-1"), v.encode("latin-1")) for k, v in headers.items()]


async def reply(send: Any, status: int, error: str, extra: dict[str, str] | None = None) -> None:
    body = json.dumps({"error": error}).encode()
    headers = {"content-type": "application/json", "content-length": str(len(body)), **(extra or {})}
    await send({"type": "http.response.start", "status": status, "headers": _encode(headers)})
    await send({"type": "http.response.body", "body": body})


async def preflight(send: Any, cors: dict[str, str]) -> None:
    allow = {"access-control-allow-methods": "GET, POST, OPTIONS", "access-control-max-age": "600",
             "access-control-allow-headers": "Authorization, Content-Type, Accept"}  # fmt: skip
    headers = {**cors, **allow, "content-length": "0"}
    await send({"type": "http.response.start", "status": 204 if cors else 403, "headers": _encode(headers)})
    await send({"type": "http.response.body", "body": b""})


def bind(host: str, port: int) -> socket.socket:
    """A listening socket at ``host:port`` (port 0: one the OS picks); ServeError when the port is taken."""
    family = socket.AF_INET6 if ":" in host.strip("[]") else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host.strip("[]"), port))
    except OSError as e:
        sock.close()
        raise ServeError(f"cannot listen on {host}:{port} ({e.strerror}): pick another --port") from None
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


def serve(library: Library, spec: ServeSpec, *, on_ready: Callable[[str], None], sock: socket.socket) -> None:
    """Serve ``library`` on ``sock`` until interrupted; ``on_ready`` gets the base URL first."""
    import uvicorn

    from retriever.serve.state import Address, remove_address, write_address

    service = Service(library, spec)
    port = sock.getsockname()[1]
    service.port = port
    host = f"[{spec.host.strip('[]')}]" if ":" in spec.host else spec.host
    base_url = f"http://{host}:{port}"
    app = build_app(service, base_url=base_url)
    config = uvicorn.Config(app, log_level="warning", lifespan="on", timeout_graceful_shutdown=3)
    server = uvicorn.Server(config)
    served = {s.bundle: s for s in library.bundles.values()}
    address = Address(spec.host, port, os.getpid(), spec.answer.to_json(), getattr(service.answerer, "notice", None))
    written: list[Any] = []

    def announce() -> None:  # once the server answers: warm its HTTP path, then tell clients and the terminal
        while not server.started:
            if server.should_exit:
                return
            time.sleep(0.01)
        warm_up(sock, spec.token)
        written.extend(b for b, s in served.items() if write_address(b, address, spec.token, s.current().generation,
                                                                      s.name))  # fmt: skip
        on_ready(base_url)

    threading.Thread(target=announce, name="serve-announce", daemon=True).start()
    try:
        server.run(sockets=[sock])
    finally:
        for bundle in written:
            remove_address(bundle, address.pid)


def warm_up(sock: socket.socket, token: str | None) -> None:
    """One ``GET /health`` to the server on ``sock`` (over loopback), before it says it is listening: the first
    request a client sends would otherwise pay for the HTTP stack's first use (25-35 ms of a served search on
    two cores). A server that does not answer it is no worse off."""
    import http.client

    host, port = sock.getsockname()[:2]
    loopback = "::1" if sock.family == socket.AF_INET6 else "127.0.0.1"
    if host not in ("", "0.0.0.0", "::"):  # noqa: S104 - the address it listens on, not one it binds
        loopback = host
    connection = http.client.HTTPConnection(loopback, port, timeout=30)
    try:
        connection.request("GET", "/health", headers={"Authorization": f"Bearer {token}"} if token else {})
        connection.getresponse().read()
    except (OSError, http.client.HTTPException):
        pass
    finally:
        connection.close()
