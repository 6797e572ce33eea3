"""``eventstore serve``: the local web viewer."""

from __future__ import annotations

import sys

import click

from .base import TEXT, fail
from .common import open_store


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True, type=TEXT,
              help="Address to listen on; anything but a loopback address shows the log to the network.")
@click.option("--port", type=click.IntRange(0, 65535), default=8000, show_default=True,
              help="Port to listen on (0: a free one).")
@click.option("--allow-host", "allow_hosts", multiple=True, metavar="NAME", type=TEXT,
              help="A host name the viewer answers to, besides localhost and IP addresses (repeatable).")
@click.option("--open", "open_browser", is_flag=True, help="Open the viewer in the web browser.")
@click.pass_context
def serve(ctx: click.Context, host: str, port: int, allow_hosts: tuple[str, ...], open_browser: bool) -> None:
    """Start the local, read-only web viewer and print its URL (Ctrl-C stops it).

    Sessions, each session as a chat, Replay at the recorded pace, live updates as other
    processes append. Needs the web extra: pip install '.[web]' in the checkout. See docs/web.md.
    """
    try:
        import starlette  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError:
        from eventstore.web import MISSING_EXTRA

        fail(MISSING_EXTRA)
    from eventstore import web

    store = open_store(ctx, readonly=True)
    try:
        sock = web.listen(host, port)
    except OSError as e:
        fail(f"cannot listen on {host}:{port}: {e.strerror or e}")
    url = web.url_of(sock)
    if not web.is_loopback(host):
        names = ", ".join(["localhost", *web.url_names(sock), *allow_hosts])
        click.echo(f"warning: listening on {host}: anyone who can reach this machine on port "
                   f"{sock.getsockname()[1]} can read the whole log. It answers requests that name it by "
                   f"IP address or as {names} (--allow-host NAME adds a name): that check keeps a web page "
                   f"elsewhere from reading the log through a visitor's browser (DNS rebinding)", err=True)

    def ready() -> None:
        click.echo(f"eventstore viewer of {store.display} at {url}  (Ctrl-C stops)")
        sys.stdout.flush()
        if open_browser:
            import webbrowser

            webbrowser.open(url)

    # db_label: a URL without its password
    web.serve(store, sock, db_label=store.display, on_ready=ready, allow_hosts=allow_hosts)


