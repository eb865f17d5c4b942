#!/usr/bin/env python3
"""Checks that ARCHITECTURE.md names only things that exist.

Every `code span` in the map that looks like a path (has a `/` or a file suffix) must be a file
or folder of the repository (or the end of one, e.g. `RelayRuntime.swift`), and every one that
looks like a Swift name (`TypeName`, `TypeName.member`, `TypeName.member(for:)`) must be
declared in Sources/ or Tests/: the type as a type, the member as a member. Names that belong to
the toolchain (Foundation, `TaskExecutor`, ...) are listed below. Exits 1 with one line per name
that is missing, so the map cannot quietly drift from the code.
    scripts/check-architecture.py [ARCHITECTURE.md]
"""

import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
# Names the map uses that the toolchain or the protocol owns, not this repository.
EXTERNAL = {
    "Foundation",
    "FoundationEssentials",
    "FoundationNetworking",
    "Date.ISO8601FormatStyle",
    "TaskExecutor",
    "Result",
    "Params",
    "Mutex",
    "Atomic",
    "Task",
    "Sendable",
}
SWIFT_NAME = re.compile(r"^([A-Z][A-Za-z0-9]*)(?:\.([a-z][A-Za-z0-9]*|[A-Z][A-Za-z0-9]*)(\(.*\))?)?$")
PATH_LIKE = re.compile(r"^[A-Za-z0-9_.+\-/]+$")
SUFFIXES = (".swift", ".md", ".py", ".json", ".yaml", ".h", ".lua", ".el", ".js", ".ts", ".sh")


def sources() -> str:
    texts = []
    for folder in ("Sources", "Tests"):
        for path in (ROOT / folder).rglob("*.swift"):
            texts.append(path.read_text(encoding="utf-8", errors="replace"))
    return "\n".join(texts)


def tracked_paths() -> list[str]:
    paths = []
    for path in ROOT.rglob("*"):
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith((".git/", ".build/", ".venv/", ".interop/")) or "/node_modules/" in rel:
            continue
        paths.append(rel + ("/" if path.is_dir() else ""))
    return paths


def path_exists(name: str, paths: list[str]) -> bool:
    name = name.rstrip("/")
    return any(p.rstrip("/") == name or p.rstrip("/").endswith("/" + name) for p in paths)


def declared(type_name: str, member: str | None, code: str) -> bool:
    if (ROOT / "Sources" / type_name).is_dir():  # a module
        return member is None
    kinds = r"(?:class|struct|enum|actor|protocol|typealias|extension)"
    if not re.search(rf"\b{kinds}\s+{re.escape(type_name)}\b", code) and not re.search(
        rf"\bfunc\s+{re.escape(type_name)}\b", code
    ):
        return False
    if member is None:
        return True
    return bool(
        re.search(rf"\b(?:func|var|let|case|init)\s+{re.escape(member)}\b", code)
        or re.search(rf"\b(?:class|struct|enum|actor|protocol|typealias)\s+{re.escape(member)}\b", code)
    )


def main() -> int:
    doc = pathlib.Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "ARCHITECTURE.md"
    text = doc.read_text(encoding="utf-8")
    code = sources()
    paths = tracked_paths()
    missing = []
    for span in sorted(set(re.findall(r"`([^`\n]+)`", text))):
        if span in EXTERNAL:
            continue
        if ("/" in span or span.endswith(SUFFIXES)) and PATH_LIKE.match(span) and not span.startswith("$/"):
            if not path_exists(span, paths):
                missing.append(f"{doc.name}: no file or folder `{span}`")
            continue
        match = SWIFT_NAME.match(span)
        if match and re.search(r"[a-z]", span):
            type_name, member, _ = match.groups()
            if not declared(type_name, member, code):
                missing.append(f"{doc.name}: `{span}` is declared nowhere in Sources/ or Tests/")
    for line in missing:
        print(line)
    print(f"architecture map: {len(missing)} missing name(s)")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
