"""An ASGI app served by uvicorn on a free loopback port, in a thread of this process: what the
proxy tests' MCP servers (oauth_mcp_server.py, dpop_mcp_server.py) share."""

from __future__ import annotations

import socket
import threading
import time
from typing import Any

import uvicorn


def free_port() -> int:
    """A loopback port free now (the server binds it before the test uses it)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


class ServerThread:
    """uvicorn serving `app` on 127.0.0.1:`port` in a daemon thread."""

    def __init__(self, app: Any, port: int, lifespan: str = "off") -> None:
        config = uvicorn.Config(
            app,
            host="127.0.0.1",
            port=port,
            log_level="warning",
            lifespan=lifespan,
            interface="asgi3",
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def start(self, what: str) -> None:
        """Returns once the server listens (uvicorn says so only through `started`)."""
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError(f"{what} did not start")
            time.sleep(0.02)

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(10)
