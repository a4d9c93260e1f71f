"""The token of `lakehouse serve`: made on its first start, asked by both endpoints, kept.

A Spark Connect client is a whole Spark session, and a JDBC client reads every table: each runs as
the user who started the server. So `serve` asks every client for a token, made on its first
start and kept in `<home>/serve/token`, readable by that user only (a file others can read is
refused; delete the file for a new token). The Connect server asks every call for it as Spark's
pre-shared bearer token (`SPARK_CONNECT_AUTHENTICATE_TOKEN`, given in the server's environment,
never on its command line); the JDBC server asks it as the password of any user
(`lakehouse.TokenAuthenticator`, which reads the file). A Connect client takes the token from
`LAKEHOUSE_REMOTE_TOKEN` or `SPARK_CONNECT_AUTHENTICATE_TOKEN` when set, else from the file.

PySpark sends a token over plain gRPC only to `localhost` (over any other host it asks for TLS,
which Spark's server does not speak): a loopback URL is addressed as `localhost`.
"""

from __future__ import annotations

import os
import secrets
import stat
from collections.abc import Mapping
from pathlib import Path

from tables.errors import ConfigError, first_line

#: Read by Spark's Connect server and by PySpark's Connect client alike.
TOKEN_ENV = "SPARK_CONNECT_AUTHENTICATE_TOKEN"
#: The project's own name for the token a `--remote` client sends; it wins over Spark's.
REMOTE_TOKEN_ENV = "LAKEHOUSE_REMOTE_TOKEN"
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


def serve_token(home: Path) -> tuple[str, bool]:
    """The token of the server of `home`: the kept one, or a new one written now (True).

    A token file other users can read is refused (ConfigError): it would let them in.
    """
    path = token_path(home)
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        mode = None
    if mode is not None and mode & 0o077:
        raise ConfigError(
            f"the serve token {path} can be read by other users (mode {stat.S_IMODE(mode):o}): "
            "chmod 600 it, or delete it to have a new one made"
        )
    kept = path.read_text().strip() if mode is not None else ""
    if kept:
        return kept, False
    token = new_token()
    write_token(home, token)
    return token, True


def token_variable(environ: Mapping[str, str]) -> str | None:
    """The environment variable a client's token comes from, ours first; None if neither."""
    return next((name for name in (REMOTE_TOKEN_ENV, TOKEN_ENV) if environ.get(name)), None)


def client_token(home: Path, environ: Mapping[str, str]) -> str | None:
    """The token a client of `home` sends: the environment's, else the server's file, else None."""
    named = token_variable(environ)
    if named is not None:
        return environ[named]
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


def connect_failure(
    url: str, home: Path, token: str | None, exc: BaseException, environ: Mapping[str, str]
) -> str:
    """One line for a failed connection: a refused token, or a server that cannot be reached."""
    if is_unauthenticated(exc):
        named = token_variable(environ)
        sent = f"the token from {named}" if named else "no token"
        if token is not None and named is None:
            sent = f"the token in {token_path(home)}"
        return (
            f"the Spark Connect server at {url} refused this client: it sent {sent}, not the "
            f"server's (`lakehouse serve` keeps it in <home>/serve/token for its user; "
            f"another user sets {REMOTE_TOKEN_ENV})"
        )
    return (
        f"cannot reach the Spark Connect server at {url} ({first_line(exc)[:160]}); start one "
        "with `lakehouse serve`"
    )
