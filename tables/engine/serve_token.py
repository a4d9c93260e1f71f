"""The token of `lakehouse serve`: made at each start, asked by both endpoints, found by clients.

A Spark Connect client is a whole Spark session, and a JDBC client reads every table: each runs as
the user who started the server. So `serve` makes a new token at each start and writes it to
`<home>/serve/token`, readable by that user only and removed when `serve` stops. The Connect
server asks every call for it as Spark's pre-shared bearer token (`SPARK_CONNECT_AUTHENTICATE_
TOKEN`, given in the server's environment, never on its command line); the JDBC server asks it
as the password of any user (`lakehouse.TokenAuthenticator`, which reads the file). A Connect
client takes the token from `SPARK_CONNECT_AUTHENTICATE_TOKEN` when set, else from the file.

PySpark sends a token over plain gRPC only to `localhost` (over any other host it asks for TLS,
which Spark's server does not speak): a loopback URL is addressed as `localhost`.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Mapping
from pathlib import Path

from tables.errors import first_line

#: Read by Spark's Connect server and by PySpark's Connect client alike.
TOKEN_ENV = "SPARK_CONNECT_AUTHENTICATE_TOKEN"
_LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "[::1]")


def token_path(home: Path) -> Path:
    """Where the server of `home` leaves its token for this user's clients."""
    return home / "serve" / "token"


def new_token() -> str:
    """A token no one can guess (256 bits)."""
    return secrets.token_urlsafe(32)


def write_token(home: Path, token: str) -> Path:
    """Write `token` where the clients of `home` find it, readable by this user only."""
    path = token_path(home)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.{os.getpid()}")
    descriptor = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as handle:
        handle.write(token)
    partial.replace(path)
    return path


def remove_token(home: Path, token: str) -> None:
    """Remove the token file of `home` if it still holds `token` (not a later server's)."""
    path = token_path(home)
    with contextlib.suppress(OSError):
        if path.read_text() == token:
            path.unlink()


def client_token(home: Path, environ: Mapping[str, str]) -> str | None:
    """The token a client of `home` sends: the environment's, else the server's file, else None."""
    given = environ.get(TOKEN_ENV)
    if given:
        return given
    try:
        return token_path(home).read_text().strip() or None
    except OSError:
        return None


def authenticated_url(url: str, token: str | None) -> str:
    """`url` (`sc://HOST:PORT[/;PARAMS]`) with `token`, a loopback host named `localhost`.

    A URL that carries a token of its own is left as it is.
    """
    address, _, params = url.removeprefix("sc://").partition("/")
    given = [p for p in params.lstrip(";").split(";") if p]
    if token is None or any(p.startswith("token=") for p in given):
        return url
    host, _, port = address.rpartition(":")
    if host in _LOOPBACK_HOSTS:
        host = "localhost"
    return f"sc://{host}:{port}/;" + ";".join([*given, f"token={token}"])


def is_unauthenticated(exc: BaseException) -> bool:
    """True when the Connect server refused the call for its token (gRPC UNAUTHENTICATED)."""
    status = getattr(exc, "getGrpcStatusCode", None)
    return callable(status) and getattr(status(), "name", None) == "UNAUTHENTICATED"


def connect_failure(url: str, home: Path, token: str | None, exc: BaseException) -> str:
    """One line for a failed connection: a refused token, or a server that cannot be reached."""
    if is_unauthenticated(exc):
        sent = f"the token from {TOKEN_ENV}" if os.environ.get(TOKEN_ENV) else "no token"
        if token is not None and not os.environ.get(TOKEN_ENV):
            sent = f"the token in {token_path(home)}"
        return (
            f"the Spark Connect server at {url} refused this client: it sent {sent}, not the "
            f"server's (`lakehouse serve` writes it to <home>/serve/token for its user; "
            f"another user sets {TOKEN_ENV})"
        )
    return (
        f"cannot reach the Spark Connect server at {url} ({first_line(exc)[:160]}); start one "
        "with `lakehouse serve`"
    )
