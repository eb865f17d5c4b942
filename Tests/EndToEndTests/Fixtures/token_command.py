#!/usr/bin/python3
"""A bearer-token helper for the tests: appends one line to COUNT_FILE per run, prints TOKEN."""
import sys

with open(sys.argv[1], "a") as f:
    f.write("run\n")
print(sys.argv[2])
