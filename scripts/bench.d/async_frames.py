#!/usr/bin/env python3
"""The async frame sizes of a Swift binary, largest first: what each call of an async function
takes from its task's allocator (an async function's frame is sized for its longest path, and a
task whose frames outgrow a slab mallocs another).

  async_frames.py BINARY [SUBSTRING ...]

Reads every async function pointer (symbols ending in `Tu`: a relative offset, then the frame
size as a 32-bit word) with `nm` and `readelf`, demangles the names with `swift demangle`, and
prints `size name` for those whose demangled name contains one of the substrings (all when none
is given). Standard library only; needs binutils and the Swift toolchain.
"""
import struct
import subprocess
import sys


def sections(binary):
    """(virtual address, file offset, size) of every section."""
    out = subprocess.run(["readelf", "-S", "-W", binary], capture_output=True, text=True, check=True).stdout
    found = []
    for line in out.splitlines():
        parts = line.replace("[ ", "[").split()
        if len(parts) > 6 and parts[0].startswith("["):
            try:
                found.append((int(parts[3], 16), int(parts[4], 16), int(parts[5], 16)))
            except ValueError:
                pass
    return found


def main():
    if len(sys.argv) < 2:
        print(__doc__.strip(), file=sys.stderr)
        sys.exit(2)
    binary, patterns = sys.argv[1], sys.argv[2:]
    symbols = []
    for line in subprocess.run(["nm", binary], capture_output=True, text=True, check=True).stdout.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[2].endswith("Tu"):
            symbols.append((int(parts[0], 16), parts[2]))
    data = open(binary, "rb").read()
    table = sections(binary)
    sizes = []
    for address, name in symbols:
        for start, offset, size in table:
            if start and start <= address < start + size:
                at = offset + address - start
                sizes.append((struct.unpack("<iI", data[at:at + 8])[1], name))
                break
    sizes.sort(reverse=True)
    names = subprocess.run(["swift", "demangle", "--simplified"], input="\n".join(n for _, n in sizes),
                           capture_output=True, text=True, check=True).stdout.splitlines()
    for (size, _), name in zip(sizes, names):
        if not patterns or any(p in name for p in patterns):
            print(size, name)


if __name__ == "__main__":
    main()
