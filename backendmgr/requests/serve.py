"""``serve``: the web page and the API."""

from typing import Annotated

from ..contract import Arg, Request
from ..immutable import frozen
from ..limits import PORT, TOKEN_CHARS

__all__ = ["ServeRequest"]


@frozen(kw_only=True, repr=True, eq=True)
class ServeRequest(Request):
    """``serve``: where the page and the API listen (beyond loopback only with a token: the
    web server's own rule, :mod:`backendmgr.web.security`)."""

    host: Annotated[str, Arg("address to listen on (%(default)s)", high=300)] = "127.0.0.1"
    port: Annotated[
        int, Arg("port (%(default)s; 0 picks a free one)", metavar="PORT", bounds=PORT)
    ] = 8577
    open: Annotated[bool, Arg("open the page in a browser")] = False
    token: Annotated[
        str | None,
        Arg(
            "use this secret (16+ characters of A-Z a-z 0-9 . _ ~ -) instead of the data "
            "home's; needed to listen beyond loopback. BACKENDMGR_TOKEN is safer: a command "
            "line is visible to other users",
            high=TOKEN_CHARS[1],  # its characters and shortest length: web.security's rule
        ),
    ] = None
