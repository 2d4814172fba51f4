"""``cairn serve``: a long-lived local process that keeps the store, the ranking index and the model warm.

A hook is a fresh process on every session start and every failed tool call. Alone, each pays for
importing SQLAlchemy and numpy, opening the store, loading the ranking index and (for recall) the
embedding model: about a second, far more at a million lessons. The daemon pays once and answers
over a Unix socket (``cairn.daemon.protocol``); the client falls back to in-process work whenever
the daemon is absent, so it is an accelerator, never a dependency.

It also runs the built-in sweeps on a schedule, as the local owner (actor ``cairn-serve``):
erase expired lessons, erase archived and rejected ones past retention (``purge``), embed
queued lessons so that searches and session starts never wait for a bulk import's vectors,
run the full ``audit verify`` (chain and state, ``serve.audit_minutes``), so an edit of the
database behind Cairn's back is reported even when nobody thinks to ask, plan a consolidation
on ``[consolidate] schedule`` (docs/consolidation.md) for a person to apply, and sync with
``sync.url`` when set (``daemon/background_sync.py``).
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import socketserver
import stat
import sys
import threading
import time
from pathlib import Path
from typing import Any

from cairn.daemon import ops, protocol
from cairn.daemon.background_sync import BackgroundSync
from cairn.daemon.hosted import CliHost
from cairn.daemon.hosted import refusal as hosted_refusal
from cairn.daemon.memory import trim_heap
from cairn.errors import CairnError
from cairn.runtime.home import database_choice
from cairn.runtime.local import database_url, ensure_home, local_principal, open_service, serve_warm

SWEEP_ACTOR = "cairn-serve"
DRAIN_EVERY = float(os.environ.get("CAIRN_DRAIN_SECONDS") or 10)  # between looks at the embedding queue
# The HTTP API and MCP, on loopback unless --host says otherwise; CAIRN_HTTP_PORT moves the default.
DEFAULT_HTTP_PORT = int(os.environ.get("CAIRN_HTTP_PORT") or 8321)
# How often the daemon asks the ledger whether a scheduled consolidation is due (one cheap query).
CONSOLIDATE_CHECK = 300.0
LOCK_NAME = "cairn.lock"  # flock()ed by the running daemon: one per home
READ_TIMEOUT = 30.0  # seconds a connection may take to send its request (clients send at once)
STEP_DOWN_WAIT = 10.0  # seconds a daemon started on demand waits for the home's lock (``other_version``)


class Daemon:
    def __init__(
        self, home: Path, log: Any = None, db: str | None = None, allow_hosts: list[str] | None = None
    ) -> None:
        from cairn.api.guard import host_names

        # Names besides localhost that the HTTP API answers to (Host/Origin): checked before anything opens.
        self.allow_hosts = host_names(allow_hosts or [])
        self.home = ensure_home(home)
        # The database this daemon serves, as clients name it (``--db`` or CAIRN_DATABASE_URL; None
        # is the home's SQLite file): a request for another one is answered "not mine" (``other_db``).
        self.db = database_choice(db)
        self.svc = open_service(self.home, db=self.db)
        self.svc.store.ensure_schema()  # before any thread: migrations run once, here
        self.started = time.time()
        self.stopping = threading.Event()
        # The stream captured now: a forwarded command swaps sys.stderr for its caller's, and the
        # daemon's own log lines (any thread) must never land there.
        err = sys.stderr
        self.log = log or (lambda msg: _write(err, f"cairn serve: {msg}\n"))
        # Answered requests, on the socket (hooks, context, recall) and over HTTP (API, MCP, dashboard);
        # handler threads of both count, so under a lock.
        self.counts = {"socket": 0, "http": 0}
        self._count_lock = threading.Lock()
        self.sweeps = True
        self.syncer = BackgroundSync(self.log)  # sync.url every sync.interval_minutes when set
        self.cli = CliHost()
        self.last_active = time.monotonic()  # the idle exit counts from here
        self.idle: float | None = None  # seconds without a request before it stops (started on demand)
        self.auto = False  # started on demand by a command (``cairn serve --auto``)
        self.stepping_down = False  # a newer Cairn called: stopping for it (``other_version``)
        self._stop: Any = None  # stops the serving loop (set once it serves)
        # Forwarded commands (cairn.daemon.hosted) open the store through cairn.runtime.local.open_service:
        # they get this warm service instead of a cold one.
        serve_warm(self.home, database_url(self.home, self.db), self.svc)

    # -- requests ---------------------------------------------------------------------------
    def handle(self, raw: bytes) -> dict[str, Any]:
        try:
            message = protocol.decode(raw)
        except CairnError as exc:
            return _error(exc)
        if message.get("v") != protocol.PROTOCOL:
            return _error(CairnError("SETUP", f"client protocol {message.get('v')!r}, daemon {protocol.PROTOCOL}"))
        if (message.get("db") or None) != self.db:
            # Not the database this daemon holds open: the client does the work in its own process.
            return {"ok": False, "other_db": True}
        if self.other_version(message.get("version")):
            return {"ok": False, "other": True, "stepping_down": self.stepping_down}
        op = message.get("op")
        params = message.get("params") or {}
        if not isinstance(op, str) or not isinstance(params, dict):
            return _error(CairnError("INVALID_INPUT", "a request has an op (string) and params (object)"))
        try:
            principal = local_principal(
                session=message.get("session") or None,
                human=bool(message.get("human")),
                actor=message.get("actor") or None,
            )
            self.svc.ensure_tenant(principal)
            data = ops.run(self.svc, principal, self.home, op, params)
            if op == "ping":  # what `cairn status` shows about the daemon
                data.update(self.describe())
        except CairnError as exc:
            return _error(exc)
        except Exception as exc:  # noqa: BLE001 - one bad request must not take the daemon down
            self.log(f"{op} failed: {type(exc).__name__}")  # never the message: it may quote lesson text
            if os.environ.get("CAIRN_DEBUG"):
                raise
            return _error(CairnError("INTERNAL", f"unexpected {type(exc).__name__} in the daemon"))
        return {"ok": True, "data": data}

    def describe(self) -> dict[str, Any]:
        from cairn import __version__

        return {
            "version": __version__,
            "uptime_seconds": round(time.time() - self.started, 1),
            "idle_exit_minutes": self.idle / 60 if self.idle else None,
            "started_on_demand": self.auto,
            "running_commands": self.cli.running,  # forwarded commands now running (one at most)
            "requests": self.requests,
        }

    def count(self, channel: str) -> None:
        with self._count_lock:
            self.counts[channel] += 1
            self.last_active = time.monotonic()

    def forward(self, raw: bytes, fds: list[int], send: Any, caller: socket.socket | None = None) -> None:
        """A whole command line (``protocol.FORWARD_OP``): "started", then its exit code; or why not."""
        try:
            message = protocol.decode(raw)
        except CairnError as exc:
            send(_error(exc))
            return
        params = message.get("params")
        if message.get("v") != protocol.PROTOCOL or not isinstance(params, dict):
            send({"ok": False, "other": True})
            return
        if (message.get("db") or None) != self.db:
            send({"ok": False, "other_db": True})
            return
        if self.other_version(params.get("version")):
            send({"ok": False, "other": True, "stepping_down": self.stepping_down})
            return
        if len(fds) not in (2, 3):
            send(hosted_refusal("a forwarded command sends its stdout and stderr (and stdin) descriptors"))
            return
        why = self.cli.acceptable(params)
        if why == "other":
            send({"ok": False, "other": True})
            return
        if why is not None:
            send(hosted_refusal(why))
            return
        code = self.cli.run(params, fds, lambda: send({"ok": True, "started": True}), caller)
        self.count("socket")
        if code is None:
            send({"ok": False, "busy": True})
        else:
            send({"ok": True, "exit": code})

    def other_version(self, version: Any) -> bool:
        """Whether the caller runs another Cairn version (then it does the work itself). A daemon that
        a command started on demand steps down for a newer one, once no forwarded command runs: left
        running across an upgrade, hooks would otherwise keep it alive, serving the old code, and every
        other command would run cold. The newer caller's next command starts its own daemon."""
        from cairn import __version__

        if version is None or version == __version__:
            return False
        if self.auto and protocol.newer(str(version), __version__) and not self.stepping_down:
            self.stepping_down = True
            self.log(f"a newer Cairn ({version}) called; stopping so that it starts its own daemon")
            threading.Thread(target=self._step_down, daemon=True).start()
        return True

    def _step_down(self) -> None:
        while self.cli.running and not self.stopping.is_set():
            time.sleep(0.05)
        if self._stop is not None:
            self._stop(signal.SIGTERM, None)

    @property
    def requests(self) -> int:
        with self._count_lock:
            return sum(self.counts.values())

    # -- warm-up and sweeps -----------------------------------------------------------------
    def warm(self) -> None:
        """Load what the first session start would otherwise wait for: index and model."""
        principal = local_principal(actor=SWEEP_ACTOR)
        self.svc.ensure_tenant(principal)
        started = time.perf_counter()
        self.svc.context(principal)
        try:
            self.svc.context(principal, task="warm up the embedding model")
        except CairnError as exc:
            self.log(f"embedding model unavailable ({exc.code}); context ranks by words only")
        self.log(f"warm in {time.perf_counter() - started:.1f}s")

    def sweep(self) -> None:
        principal = local_principal(actor=SWEEP_ACTOR)
        for kind in ("expired", "archived"):
            try:
                result = self.svc.purge(principal, expired=kind == "expired", archived=kind == "archived")
                if result.get("purged"):
                    self.log(f"sweep {kind}: erased {result['purged']}")
            except CairnError as exc:
                self.log(f"sweep {kind} failed: {exc.code}")

    def verify_audit(self) -> bool:
        """The full audit verify of the local store; a failure is logged loudly, with the address of
        the first mismatch but never lesson content (the service's message names rows, not text)."""
        try:
            result = self.svc.audit_verify(local_principal(actor=SWEEP_ACTOR), full=True)
        except CairnError as exc:
            if exc.code == "AUDIT_BROKEN":
                self.log(f"AUDIT BROKEN — {exc.message}. Run `cairn audit verify` and investigate.")
            else:
                self.log(f"audit verify failed: {exc.code}")
            return False
        except Exception as exc:  # noqa: BLE001 - keep serving; the next round retries
            self.log(f"audit verify failed: {type(exc).__name__}")
            return False
        state = result["state"] or {}
        self.log(f"audit verified: {result['checked']} ledger row(s), {state.get('lessons', 0)} lesson(s)")
        return True

    def consolidate(self) -> None:
        """A consolidation plan when one is due (``[consolidate] schedule``; applied only with
        ``auto_apply``). The log says how many actions of each kind, never a lesson's text."""
        try:
            result = self.svc.consolidate_scheduled(local_principal(actor=SWEEP_ACTOR))
        except CairnError as exc:
            self.log(f"consolidation failed: {exc.code}")
            return
        except Exception as exc:  # noqa: BLE001 - keep serving; the next round retries
            self.log(f"consolidation failed: {type(exc).__name__}")
            return
        if result is not None:
            run = result["run"]
            counts = ", ".join(f"{n} {s}" for s, n in run["actions"].items() if n) or "nothing to do"
            self.log(f"consolidation run {run['id']} ({run['status']}): {counts}")

    def _background(self) -> None:
        """Sweeps at start and then every ``serve.sweep_minutes``; the full audit verify after the first
        sweep and then every ``serve.audit_minutes``; a consolidation plan when the ledger says one is
        due (checked with the sweeps); the embedding queue every few seconds."""
        next_sweep = next_audit = next_consolidate = 0.0
        served_at_trim = -1
        try:  # a fresh home has no local store yet; the embedding state row needs its tenant
            self.svc.ensure_tenant(local_principal(actor=SWEEP_ACTOR))
        except CairnError as exc:
            self.log(f"cannot open the local store: {exc.code}")
        while not self.stopping.is_set():
            if self.sweeps and time.monotonic() >= next_sweep:
                self.sweep()
                next_sweep = time.monotonic() + self.svc.settings.sweep_minutes * 60
            if self.sweeps and time.monotonic() >= next_audit:
                self.verify_audit()
                next_audit = time.monotonic() + self.svc.settings.audit_minutes * 60
            if self.sweeps and time.monotonic() >= next_consolidate:
                self.consolidate()
                next_consolidate = time.monotonic() + CONSOLIDATE_CHECK
            self.syncer.when_due(self.svc, local_principal(actor=SWEEP_ACTOR))
            embedded = 0
            try:
                # Not when a forwarded import is draining in this process already (it embeds it all).
                embedded = self.svc.drain_embeddings(local_principal(actor=SWEEP_ACTOR), wait=False)
                if embedded:
                    self.log(f"embedded {embedded} queued lesson(s)")
            except CairnError as exc:
                self.log(f"embedding failed: {exc.code}")
            except Exception as exc:  # noqa: BLE001 - keep serving; the next round retries
                self.log(f"embedding failed: {type(exc).__name__}")
            # A drain's batches and a request that rebuilt the ranking index peak once; trimming here,
            # off the request path and only after work, keeps the idle daemon from holding that peak.
            if embedded or self.requests != served_at_trim:
                served_at_trim = self.requests
                trim_heap()
            self.stopping.wait(DRAIN_EVERY)

    # -- serving ----------------------------------------------------------------------------
    def serve(
        self,
        warm: bool = True,
        background: bool = True,
        sweeps: bool = True,
        http: tuple[str, int, bool] | None = None,
        idle: float | None = None,
        auto: bool = False,
    ) -> dict[str, Any]:
        """Serve until SIGTERM/SIGINT, or until ``idle`` seconds pass without a request (the daemon a
        command started on demand). ``http`` is (host, port, required): a port the user chose must
        listen or the daemon does not start; the default port, when taken (another home's daemon),
        is skipped with a note and the socket still serves hooks."""
        # One daemon per home: held for the daemon's life, so two started at once (two commands that
        # both found none) cannot both get past here, whatever the socket's state.
        self.auto = auto
        try:
            lock = self._lock_home()
        except CairnError:
            if auto:  # the daemon of an older version may be stepping down for this one: give it a moment
                lock = self._lock_home(wait=STEP_DOWN_WAIT)
            elif not self._stop_daemon_started_on_demand():
                raise
            else:
                lock = self._lock_home()
        self.idle = idle
        try:
            return self._serve(warm, background, sweeps, http, idle)
        finally:
            os.close(lock)

    def _stop_daemon_started_on_demand(self) -> bool:
        """``cairn serve`` in the foreground takes the home over from a daemon a command started on
        demand (socket only, idle exit): it asks that one to stop and waits for its lock."""
        import fcntl

        from cairn.runtime.client import ask_daemon

        answer = ask_daemon(self.home, {"v": protocol.PROTOCOL, "op": "ping", "params": {}}) or {}
        data = answer.get("data") or {}
        if not answer.get("ok") or not data.get("started_on_demand") or not isinstance(data.get("pid"), int):
            return False
        self.log(f"stopping the daemon started on demand (pid {data['pid']}) to serve in its place")
        with contextlib.suppress(ProcessLookupError):
            os.kill(data["pid"], signal.SIGTERM)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            fd = os.open(self.home / LOCK_NAME, os.O_WRONLY | os.O_CREAT, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                time.sleep(0.1)
                continue
            finally:
                os.close(fd)  # released at once: _lock_home takes it for good
            return True
        return False

    def _lock_home(self, wait: float = 0.0) -> int:
        import fcntl

        fd = os.open(self.home / LOCK_NAME, os.O_WRONLY | os.O_CREAT, 0o600)
        deadline = time.monotonic() + wait
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return fd
            except OSError:
                if time.monotonic() >= deadline:
                    os.close(fd)
                    raise CairnError("SETUP", f"a Cairn daemon already serves {self.home}") from None
                time.sleep(0.1)

    def _serve(
        self,
        warm: bool,
        background: bool,
        sweeps: bool,
        http: tuple[str, int, bool] | None,
        idle: float | None,
    ) -> dict[str, Any]:
        path = Path(protocol.socket_path(self.home))
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        for directory in {self.home, path.parent}:
            mode = stat.S_IMODE(directory.stat().st_mode)
            if mode & 0o077 and directory.stat().st_uid == os.getuid():
                os.chmod(directory, 0o700)  # the socket's directory is owner-only, like the socket
                self.log(f"tightened {directory} from {mode:o} to 700")
        if path.exists():
            from cairn.runtime.client import ask_daemon

            if ask_daemon(self.home, {"v": protocol.PROTOCOL, "op": "ping", "params": {}}) is not None:
                raise CairnError("SETUP", f"a Cairn daemon already serves {self.home} (socket {path})")
            path.unlink()  # left by a daemon that died
        self.sweeps = sweeps
        daemon = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                sock: socket.socket = self.request
                uid = protocol.peer_uid(sock)
                # Read the request before answering, even one that will be refused: a reply sent and
                # closed before the client has written makes the client's write fail (EPIPE), and it
                # never reads the refusal. The timeout bounds a peer that connects and never writes.
                sock.settimeout(READ_TIMEOUT)
                fds: list[int] = []
                try:
                    raw, fds = _read_with_fds(sock)
                    if uid is not None and uid != os.getuid():
                        answer = _error(CairnError("FORBIDDEN", "not the daemon's owner"))
                    elif raw and fds:
                        sock.settimeout(None)

                        def send(answer: dict[str, Any]) -> None:
                            with contextlib.suppress(OSError):
                                sock.sendall(protocol.encode(answer))

                        daemon.forward(raw, fds, send, sock)
                        return
                    elif raw:
                        answer = daemon.handle(raw)
                        daemon.count("socket")
                    else:
                        return
                    with contextlib.suppress(OSError):
                        sock.sendall(protocol.encode(answer))
                except (OSError, ValueError):
                    return
                finally:
                    for fd in fds:
                        with contextlib.suppress(OSError):
                            os.close(fd)

        class Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
            daemon_threads = True

        old_umask = os.umask(0o177)  # the socket is created 0600: no window where others could connect
        try:
            server = Server(str(path), Handler)
        finally:
            os.umask(old_umask)
        os.chmod(path, 0o600)
        pid_file = self.home / protocol.PID_NAME
        pid_file.write_text(f"{os.getpid()}\n", encoding="utf-8")

        web: list[Any] = []  # the uvicorn server once it listens

        def stop(_signum: int, _frame: Any) -> None:
            self.stopping.set()
            for w in web:
                w.should_exit = True
            threading.Thread(target=server.shutdown, daemon=True).start()

        # Before anything listens: a client may stop the daemon as soon as it answers, and a SIGTERM
        # that arrived before the handler would kill it without its clean-up.
        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, stop)
        self._stop = stop
        if http and http[2]:
            try:
                web.append(self._start_http(http[0], http[1]))
            except CairnError:
                signal.signal(signal.SIGTERM, signal.SIG_DFL)
                signal.signal(signal.SIGINT, signal.default_int_handler)
                server.server_close()
                path.unlink(missing_ok=True)
                pid_file.unlink(missing_ok=True)
                raise
            if self.stopping.is_set():  # stopped while the HTTP API was starting
                stop(signal.SIGTERM, None)
        elif http:
            # The default port: hooks must not wait for the HTTP stack to import, and a taken port
            # (another home's daemon) is a note, not a failure.
            threading.Thread(target=self._http_in_background, args=(http[0], http[1], web), daemon=True).start()

        self.log(f"serving {self.home} on {path} (pid {os.getpid()})")
        if warm:
            threading.Thread(target=self._warm_quietly, daemon=True).start()
        if background:
            threading.Thread(target=self._background, daemon=True).start()
        if idle:
            threading.Thread(target=self._idle_watch, args=(idle, stop), daemon=True).start()
        try:
            server.serve_forever(poll_interval=0.5)
        finally:
            server.server_close()
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
            with contextlib.suppress(FileNotFoundError):
                pid_file.unlink()
            self.svc.store.dispose()
        # The summary is the caller's to print (`cairn serve` prints it once, or its --json envelope).
        return {
            "home": str(self.home),
            "requests": self.requests,
            "socket_requests": self.counts["socket"],
            "http_requests": self.counts["http"],
            "seconds": round(time.time() - self.started, 1),
        }

    def _idle_watch(self, idle: float, stop: Any) -> None:
        """Stop once ``idle`` seconds pass with no request and no forwarded command running."""
        while not self.stopping.wait(max(0.2, min(5.0, idle / 4))):
            if self.cli.running == 0 and time.monotonic() - self.last_active >= idle:
                self.log(f"no request for {idle:g}s; stopping")
                stop(signal.SIGTERM, None)
                return

    def _start_http(self, host: str, port: int) -> Any:
        """The HTTP API and MCP endpoint on ``host:port``, sharing this process's warm service."""
        import uvicorn

        from cairn.api.app import create_app

        loopback = host in ("127.0.0.1", "localhost", "::1")
        # Off loopback without --allow-host the callers' names are unknown: no Host check, tokens guard it.
        hosts = self.allow_hosts if loopback or self.allow_hosts else None
        from cairn.gateway.app import from_settings

        app = create_app(self.svc, allowed_hosts=hosts, gateway=from_settings(self.svc))

        async def counted(scope: dict[str, Any], receive: Any, send: Any) -> None:
            if scope.get("type") == "http":
                self.count("http")
            await app(scope, receive, send)

        config = uvicorn.Config(counted, host=host, port=port, log_level="warning", access_log=False)
        web = uvicorn.Server(config)
        thread = threading.Thread(target=web.run, name="cairn-http", daemon=True)
        thread.start()
        deadline = time.time() + 30
        while not web.started and thread.is_alive() and time.time() < deadline:
            time.sleep(0.05)
        if not web.started:
            raise CairnError("SETUP", f"the HTTP API could not listen on {host}:{port} (in use, or not allowed)")
        self.log(f"HTTP API and MCP on http://{host}:{port} (/v1, /mcp, /docs)")
        return web

    def _http_in_background(self, host: str, port: int, web: list[Any]) -> None:
        try:
            web.append(self._start_http(host, port))
        except CairnError as exc:
            self.log(f"{exc.message}; serving the socket only (choose a port with --port)")
        except Exception as exc:  # noqa: BLE001 - the socket keeps serving hooks
            self.log(f"the HTTP API did not start ({type(exc).__name__}); serving the socket only")

    def _warm_quietly(self) -> None:
        try:
            self.warm()
        except Exception as exc:  # noqa: BLE001 - a failed warm-up only means a slower first request
            self.log(f"warm-up failed: {type(exc).__name__}")
        finally:
            trim_heap()  # opening (maybe migrating) the store and building the index peak once


def _write(stream: Any, text: str) -> None:
    with contextlib.suppress(Exception):  # a closed log stream must not stop the daemon
        stream.write(text)
        stream.flush()


def _read_with_fds(sock: socket.socket) -> tuple[bytes, list[int]]:
    """One request and the descriptors sent with it (a forwarded command sends its stdio)."""
    data, fds, _flags, _addr = socket.recv_fds(sock, 65536, 3)
    if data and not data.endswith(b"\n") and len(data) <= protocol.MAX_MESSAGE:
        try:
            data += protocol.read_message(sock)
        except (OSError, ValueError):
            for fd in fds:
                with contextlib.suppress(OSError):
                    os.close(fd)
            raise
    return data, list(fds)


def _error(exc: CairnError) -> dict[str, Any]:
    return {"ok": False, "error": {"code": exc.code, "message": exc.message, "data": exc.data}}
