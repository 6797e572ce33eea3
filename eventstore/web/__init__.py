"""``eventstore serve``: a local, read-only web viewer of the log (docs/web.md).

Needs the extra ``web`` (``pip install '.[web]'`` in the checkout) (Starlette and uvicorn). :func:`serve` runs it;
:func:`eventstore.web.app.create_app` is the ASGI application, for another server.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable, Iterable

__all__ = ["serve", "is_loopback", "url_of", "url_names", "MISSING_EXTRA"]

MISSING_EXTRA = ("the web viewer needs Starlette and uvicorn: pip install starlette uvicorn "
                 "(in the checkout of eventstore: pip install '.[web]')")


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a name or an address) is this machine only."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def listen(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host:port`` (port 0: a free one). Raises ``OSError``."""
    infos = socket.getaddrinfo(host.strip("[]"), port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    family, type_, proto, _, address = infos[0]
    sock = socket.socket(family, type_, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if family == socket.AF_INET6:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        sock.bind(address)
        sock.listen(128)
        sock.set_inheritable(True)
    except OSError:
        sock.close()
        raise
    return sock


def url_of(sock: socket.socket) -> str:
    """The URL to print for the listening ``sock``: its address, or this machine's host
    name when it listens on every address (``0.0.0.0``, ``::``)."""
    host, port = sock.getsockname()[:2]
    if host in ("0.0.0.0", "::"):
        host = socket.gethostname()
    elif sock.family == socket.AF_INET6:
        host = f"[{host}]"
    return f"http://{host}:{port}/"


def url_names(sock: socket.socket) -> list[str]:
    """The host names a request may give besides ``localhost`` and IP addresses: the one
    :func:`url_of` prints (this machine's name, when it listens on every address)."""
    host = sock.getsockname()[0]
    return [socket.gethostname()] if host in ("0.0.0.0", "::") else []


def serve(store, sock: socket.socket, *, db_label: str, on_ready: Callable[[], None] | None = None,
          allow_hosts: Iterable[str] = ()) -> None:
    """Serve the viewer of ``store`` on the listening ``sock`` until interrupted: returns
    after Ctrl-C (SIGINT); SIGTERM ends the process by the signal once the server has
    stopped. A request is answered when its ``Host`` is an IP address, ``localhost``, the
    name :func:`url_of` prints, or one of ``allow_hosts`` (421 otherwise: DNS rebinding).
    Raises ``ImportError`` without the ``web`` extra."""
    import uvicorn

    from .app import create_app

    app = create_app(store, db_label=db_label, allowed_hosts=[*url_names(sock), *allow_hosts], on_ready=on_ready)
    hub = app.app.state.hub

    class Server(uvicorn.Server):
        def handle_exit(self, sig, frame):  # Ctrl-C: end the open event streams, then stop
            hub.close_streams()
            super().handle_exit(sig, frame)

    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on",
                            timeout_graceful_shutdown=2)
    try:
        Server(config).run(sockets=[sock])
    except KeyboardInterrupt:  # uvicorn raises the Ctrl-C again once it has stopped
        pass
