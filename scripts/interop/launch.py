#!/usr/bin/env python3
"""Start a server in its own session (process group) on a pre-bound loopback socket.

usage: launch.py --port P|0 --portfile F --log F --cwd D -- CMD ARG...   (any "{fd}" in ARG is replaced
by the listening socket's file descriptor number)

Binding here, before exec, means the port is known (written to --portfile) and reserved before the
server starts: no race for a "free" port, and connections made before the server is ready simply wait
in the backlog. The process then execs CMD, so its pid (and process-group id) is that of the server.
Used by scripts/interop/stack; standard library only.
"""
import argparse
import os
import resource
import signal
import socket
import sys


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--portfile", required=True)
    ap.add_argument("--log", required=True)
    ap.add_argument("--cwd", required=True)
    ap.add_argument("--backlog", type=int, default=4096)
    ap.add_argument("cmd", nargs=argparse.REMAINDER)
    args = ap.parse_args()
    cmd = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
    if not cmd:
        ap.error("no command")

    try:
        os.setsid()  # own session and process group: `kill -- -PID` stops the server and its workers
    except OSError:
        pass  # already a process-group leader: its group is its own anyway
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", args.port))
    sock.listen(args.backlog)
    sock.set_inheritable(True)
    fd = sock.fileno()
    tmp = args.portfile + ".tmp"
    with open(tmp, "w") as f:
        f.write(f"{sock.getsockname()[1]}\n")
    os.replace(tmp, args.portfile)

    port = sock.getsockname()[1]
    os.environ["INTEROP_PORT"] = str(port)  # lets the server know its own URL (e.g. IDP_BASE)

    log = os.open(args.log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.chdir(args.cwd)
    # A parent may have blocked or ignored signals (a Swift test thread blocks SIGTERM; bash ignores
    # SIGINT/SIGQUIT for background jobs): both survive exec, so reset them or `stack down` would hang.
    signal.pthread_sigmask(signal.SIG_SETMASK, [])
    for sig in (signal.SIGINT, signal.SIGQUIT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)
    # Keep only stdio and the socket: a descriptor leaked from whoever ran the stack (say, the write
    # end of a test's pipe) would otherwise live as long as the server.
    os.closerange(3, fd)
    os.closerange(fd + 1, 65536)
    # 1,000 concurrent SSE clients need more descriptors than the usual soft limit of 1,024
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or hard > soft:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard if hard != resource.RLIM_INFINITY else 65536, hard))
    argv = [a.replace("{fd}", str(fd)) for a in cmd]
    os.execvp(argv[0], argv)


if __name__ == "__main__":
    try:
        main()
    except OSError as e:
        print(f"launch.py: {e}", file=sys.stderr)
        sys.exit(1)
