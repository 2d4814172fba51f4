"""The dashboard's session cookie, its CSRF tokens and its one-shot flash messages.

Why the cookie holds the token itself (``<nonce>.<token secret>``), HttpOnly and SameSite=Strict:
the service resolves a token on every call (``resolve_token``), so keeping the secret in the
browser's cookie jar means revocation, expiry and a role change take effect on the very next
request, the server keeps no session table to lose on restart or to share between workers, and the
secret is never in a URL, a page, a log line or script-readable storage. The nonce is fresh at every
sign-in and keys the CSRF token, so a form token from one session is worthless in another.

CSRF tokens are ``HMAC(server key, nonce)``: a cross-site page cannot read the cookie (HttpOnly,
and SameSite=Strict keeps the browser from sending it at all on a cross-site POST), so it cannot
compute the token the form must carry. The sign-in form, which has no session yet, is bound the
same way to a random pre-session cookie (login CSRF). Every comparison is constant-time.

Flash messages survive one redirect (Post/Redirect/Get) in a signed, short-lived cookie; they are
text, escaped by the templates like everything else.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import secrets
from dataclasses import dataclass
from typing import Any

SESSION_COOKIE = "cairn_ui"
PRESESSION_COOKIE = "cairn_ui_pre"
FLASH_COOKIE = "cairn_ui_flash"
MAX_COOKIE_VALUE = 400  # a nonce, a dot and a token (tokens are at most 200 characters)
MAX_FLASH_CHARS = 1500  # cookies are limited to ~4 KiB; a flash is a sentence or a short list


@dataclass(frozen=True)
class Keys:
    """The server-side secret every CSRF token and flash signature is derived from.

    Created at app start unless given: a restart only invalidates forms that were open (the user
    reloads), not sessions. Several workers behind one address must be given the same secret.
    """

    secret: bytes

    @classmethod
    def generate(cls) -> Keys:
        return cls(secrets.token_bytes(32))

    def _mac(self, purpose: str, value: str) -> str:
        return hmac.new(self.secret, f"{purpose}\x00{value}".encode(), hashlib.sha256).hexdigest()

    def csrf(self, nonce: str) -> str:
        return self._mac("csrf", nonce)

    def signin_csrf(self, pre: str) -> str:
        return self._mac("signin", pre)

    def check(self, expected: str, given: str | None) -> bool:
        return bool(given) and hmac.compare_digest(expected.encode(), (given or "").encode())

    # -- flash --------------------------------------------------------------------------------
    def seal_flash(self, kind: str, message: str) -> str:
        body = json.dumps({"kind": kind, "message": message[:MAX_FLASH_CHARS]}, separators=(",", ":"))
        blob = base64.urlsafe_b64encode(body.encode()).decode().rstrip("=")
        return f"{blob}.{self._mac('flash', blob)}"

    def open_flash(self, raw: str | None) -> dict[str, Any] | None:
        if not raw or "." not in raw or len(raw) > 4 * MAX_FLASH_CHARS:
            return None
        blob, _, mac = raw.rpartition(".")
        if not hmac.compare_digest(mac.encode(), self._mac("flash", blob).encode()):
            return None
        try:
            data = json.loads(base64.urlsafe_b64decode(blob + "=" * (-len(blob) % 4)))
        except (ValueError, binascii.Error, UnicodeError):
            return None
        if not isinstance(data, dict) or data.get("kind") not in ("ok", "error"):
            return None
        return {"kind": data["kind"], "message": str(data.get("message", ""))}


def new_session_value(token: str) -> str:
    """The cookie value for a fresh sign-in: a new nonce (keys CSRF) and the token secret."""
    return f"{secrets.token_urlsafe(18)}.{token.strip()}"


def parse_session(raw: str | None) -> tuple[str, str] | None:
    """(nonce, token secret) from the cookie, or None when it is absent or malformed."""
    if not raw or len(raw) > MAX_COOKIE_VALUE:
        return None
    nonce, sep, token = raw.partition(".")
    if not sep or not nonce or not token:
        return None
    return nonce, token


def new_presession() -> str:
    return secrets.token_urlsafe(18)


def valid_presession(raw: str) -> bool:
    return 16 <= len(raw) <= 64 and all(c.isalnum() or c in "-_" for c in raw)
