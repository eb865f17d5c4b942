#!/usr/bin/env python3
"""Brings an interop stack down when a watched process exits or a lifetime runs out.

usage: watchdog.py --stack PATH --state DIR [--pid PID] [--max-lifetime SECONDS]

Started by `stack up --watch-pid PID` / `--max-lifetime S` so that servers never outlive the test run
that started them, even if that run is killed. Waits on a pidfd (no polling) where the kernel has
them. Standard library only.
"""
import argparse
import os
import select
import signal
import subprocess
import time


def wait_for_exit(pid: int, timeout: float | None) -> None:
    """Returns when `pid` has exited or `timeout` seconds have passed (None = forever)."""
    deadline = None if timeout is None else time.monotonic() + timeout
    try:
        fd = os.pidfd_open(pid)
    except (AttributeError, OSError):
        fd = None
    if fd is not None:
        select.select([fd], [], [], None if deadline is None else max(0.0, deadline - time.monotonic()))
        os.close(fd)
        return
    while deadline is None or time.monotonic() < deadline:  # fallback: poll
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        except PermissionError:
            pass
        time.sleep(0.5)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--stack", required=True)
    ap.add_argument("--state", required=True)
    ap.add_argument("--pid", type=int)
    ap.add_argument("--max-lifetime", type=float, default=0)
    args = ap.parse_args()
    os.closerange(3, 65536)  # hold no descriptor leaked from the process that ran `stack up`
    signal.pthread_sigmask(signal.SIG_SETMASK, [])  # a test thread may have blocked SIGTERM
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    try:
        os.setsid()  # survive the watched process's group being killed
    except OSError:
        pass
    lifetime = args.max_lifetime if args.max_lifetime > 0 else None
    if args.pid:
        wait_for_exit(args.pid, lifetime)
    elif lifetime is not None:
        time.sleep(lifetime)
    else:
        return
    env = dict(os.environ, INTEROP_FROM_WATCHDOG="1")
    subprocess.run([args.stack, "down", "--state", args.state], env=env, check=False)


if __name__ == "__main__":
    main()
