"""Runs a fixture script: `python3 -u exit_with_parent.py SCRIPT ARGUMENTS...`.

It runs SCRIPT as `__main__` with ARGUMENTS, and exits when its stdin reaches end of file. The
test process holds the pipe's other end, so when a test binary dies its servers go with it
instead of living on and holding `swift test`'s output pipe open (swift test then waits for
them rather than reporting the crash). Stdin is the watch's: a fixture run this way reads none."""

import os
import runpy
import sys
import threading


def exit_at_end_of_stdin():
    while sys.stdin.buffer.read1(65536):
        pass
    os._exit(0)


if __name__ == "__main__":
    threading.Thread(target=exit_at_end_of_stdin, daemon=True).start()
    script = sys.argv[1]
    sys.argv = sys.argv[1:]
    # As `python3 SCRIPT` would: the script's directory first on the path (unless safe_path).
    if not getattr(sys.flags, "safe_path", False):
        sys.path[0] = os.path.dirname(os.path.abspath(script))
    runpy.run_path(script, run_name="__main__")
