"""``memory-gateway`` (and ``cairn memory-gateway``): the peer's command line, one envelope per call.

The start path imports only the standard library and this package's small modules; the Cairn
store (SQLAlchemy, the service) loads only for the verbs that need it — ``read`` and
``neighborhood`` are served from the files alone. The body is read from stdin before the corpus
lock is taken, so a caller stuck on its own stdin never holds other writers up.
"""

from __future__ import annotations

import os
import sys

from cairn.compat.memory_gateway.envelope import EXIT_OK, GatewayError, emit, note

CORPUS_ENV = "MEMORY_GATEWAY_CORPUS"
VERBS = ("create", "read", "update", "archive", "search", "neighborhood", "index", "history", "forget")

USAGE = """usage: memory-gateway [--corpus DIR] <verb> [args]     (or MEMORY_GATEWAY_CORPUS=DIR)

  create <name> --type T [--description D]          body on stdin
  read <slug> [--archived]
  update <slug>                                      append; the text on stdin
  update --supersede --type T --name N [--supersedes <slug>] [--description D]   new body on stdin
  archive <slug>
  search <query>
  neighborhood <slug> [--depth N] [--budget N]      depth 1..3 (more is clamped to 3)
  index
  history <slug>                                     every version the Cairn store holds
  forget <slug> --reason R                           erase from files and archive; tombstone the content

types: user, feedback, project, reference. One JSON envelope on stdout; diagnostics on stderr.
exit: 0 ok, 1 refused or usage, 2 setup or I/O error.
"""

# flag -> takes a value
FLAGS = {
    "create": {"--type": True, "--description": True},
    "read": {"--archived": False},
    "update": {"--supersede": False, "--type": True, "--name": True, "--supersedes": True, "--description": True},
    "archive": {},
    "search": {},
    "neighborhood": {"--depth": True, "--budget": True},
    "index": {},
    "history": {},
    "forget": {"--reason": True},
}


def _parse(verb: str, args: list[str]) -> tuple[list[str], dict[str, str | bool]]:
    allowed = FLAGS[verb]
    pos: list[str] = []
    opts: dict[str, str | bool] = {}
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            pos.extend(args[i + 1 :])
            break
        name, eq, value = arg.partition("=")
        if arg.startswith("--") and len(arg) > 2:
            if name not in allowed:
                raise GatewayError("USAGE", f"{verb} does not take {name}; see memory-gateway --help")
            if allowed[name]:
                if eq:
                    opts[name] = value
                elif i + 1 < len(args):
                    opts[name] = args[i + 1]
                    i += 1
                else:
                    raise GatewayError("USAGE", f"{name} needs a value")
            elif eq:
                raise GatewayError("USAGE", f"{name} takes no value")
            else:
                opts[name] = True
        else:
            pos.append(arg)
        i += 1
    return pos, opts


def _one(verb: str, pos: list[str], what: str) -> str:
    if len(pos) != 1:
        got = "nothing" if not pos else " ".join(repr(p) for p in pos)
        raise GatewayError("USAGE", f"{verb} takes one {what}, got {got}")
    return pos[0]


def _int(opts: dict[str, str | bool], flag: str, default: int) -> int:
    raw = opts.get(flag)
    if raw is None:
        return default
    try:
        value = int(str(raw))
    except ValueError:
        raise GatewayError("USAGE", f"{flag} must be a whole number, got {raw!r}") from None
    if value < 1:
        raise GatewayError("USAGE", f"{flag} must be at least 1, got {value}")
    return value


def _stdin() -> str:
    if sys.stdin is None or sys.stdin.isatty():
        return ""
    data = sys.stdin.buffer.read()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise GatewayError("USAGE", f"stdin is not UTF-8 text (byte {exc.start})") from None


def _opt(opts: dict[str, str | bool], flag: str) -> str | None:
    value = opts.get(flag)
    return value if isinstance(value, str) else None


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    from cairn.runtime import clock

    clock.install()
    if "--help" in argv or "-h" in argv:
        sys.stderr.write(USAGE)
        return EXIT_OK
    corpus = os.environ.get(CORPUS_ENV) or None
    rest: list[str] = []
    verb_seen = False
    i = 0
    while i < len(argv):
        arg = argv[i]
        if not verb_seen and (arg == "--corpus" or arg.startswith("--corpus=")):
            if "=" in arg:
                corpus = arg.split("=", 1)[1]
            elif i + 1 < len(argv):
                corpus = argv[i + 1]
                i += 1
            else:
                return emit("", None, error=GatewayError("USAGE", "--corpus needs a directory"))
        else:
            verb_seen = True
            rest.append(arg)
        i += 1
    verb = rest[0] if rest else ""
    if not verb:
        sys.stderr.write(USAGE)
        return emit("", None, error=GatewayError("USAGE", "no verb given; see usage above"))
    if verb not in VERBS:
        return emit(verb, None, error=GatewayError("UNKNOWN_VERB", f"unknown verb {verb!r}; verbs: {', '.join(VERBS)}"))
    gw = None
    try:
        pos, opts = _parse(verb, rest[1:])
        if not corpus:
            raise GatewayError("SETUP", f"no corpus: pass --corpus DIR or set {CORPUS_ENV}")
        from cairn.compat.memory_gateway.verbs import DEFAULT_BUDGET, MAX_DEPTH, Gateway

        body = _stdin() if verb in ("create", "update") else ""
        gw = Gateway(corpus)
        slug: str | None = None
        if verb == "create":
            name = _one(verb, pos, "name")
            slug, data = gw.create(name, _opt(opts, "--type"), _opt(opts, "--description") or "", body)
        elif verb == "read":
            slug, data = gw.read(_one(verb, pos, "slug"), bool(opts.get("--archived")))
        elif verb == "update":
            if opts.get("--supersede"):
                if pos:
                    raise GatewayError("USAGE", "update --supersede takes no slug; use --supersedes SLUG")
                slug, data = gw.supersede(
                    _opt(opts, "--type"), _opt(opts, "--name"), _opt(opts, "--supersedes"),
                    _opt(opts, "--description"), body,
                )  # fmt: skip
            else:
                for flag in ("--type", "--name", "--supersedes", "--description"):
                    if flag in opts:
                        raise GatewayError("USAGE", f"{flag} belongs to update --supersede")
                slug, data = gw.update(_one(verb, pos, "slug"), body)
        elif verb == "archive":
            slug, data = gw.archive(_one(verb, pos, "slug"))
        elif verb == "search":
            if not pos:
                raise GatewayError("USAGE", "search needs a query")
            data = gw.search(" ".join(pos))
        elif verb == "neighborhood":
            depth = _int(opts, "--depth", 1)
            if depth > MAX_DEPTH:
                note(f"memory-gateway: --depth {depth} clamped to {MAX_DEPTH}")
                depth = MAX_DEPTH
            slug, data = gw.neighborhood(_one(verb, pos, "slug"), depth, _int(opts, "--budget", DEFAULT_BUDGET))
        elif verb == "index":
            if pos:
                raise GatewayError("USAGE", "index takes no arguments")
            data = gw.index()
        elif verb == "history":
            slug, data = gw.history(_one(verb, pos, "slug"))
        else:
            slug, data = gw.forget(_one(verb, pos, "slug"), _opt(opts, "--reason"))
        return emit(verb, slug, data)
    except GatewayError as exc:
        return emit(verb, None, error=exc)
    except KeyboardInterrupt:
        return emit(verb, None, error=GatewayError("INTERNAL", "interrupted"))
    except Exception as exc:  # noqa: BLE001 - one envelope, never a traceback
        from cairn.errors import CairnError

        if isinstance(exc, CairnError):
            from cairn.compat.memory_gateway.envelope import from_cairn

            return emit(verb, None, error=from_cairn(exc))
        if isinstance(exc, OSError):
            return emit(verb, None, error=GatewayError("IO_ERROR", f"{exc.strerror or exc}"))
        if os.environ.get("CAIRN_DEBUG"):
            raise
        return emit(
            verb, None, error=GatewayError("INTERNAL", f"unexpected {type(exc).__name__}; rerun with CAIRN_DEBUG=1")
        )
    finally:
        if gw is not None:
            gw.close()


def entry() -> None:
    sys.exit(main())
