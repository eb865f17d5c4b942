#!/usr/bin/env python3
"""Validates config.example.yaml against schemas/config.schema.json (JSON Schema 2020-12).

Needs the `jsonschema` and `pyyaml` packages. Exits non-zero when the schema itself is invalid
or the example does not validate. The Swift test SchemaAgreementTests checks that the schema and
the decoder accept the same keys.
"""
import json
import pathlib
import sys

import jsonschema
import yaml

ROOT = pathlib.Path(__file__).resolve().parent.parent


def main() -> int:
    schema_path = ROOT / "schemas" / "config.schema.json"
    example_path = ROOT / "config.example.yaml"
    schema = json.loads(schema_path.read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    print(f"schema ok: {schema_path.relative_to(ROOT)} is a valid JSON Schema 2020-12 document")

    text = example_path.read_text()
    first_line = text.splitlines()[0] if text else ""
    expected = "# yaml-language-server: $schema=schemas/config.schema.json"
    if first_line != expected:
        print(f"{example_path.name}:1: the first line must be '{expected}'", file=sys.stderr)
        return 1
    document = yaml.safe_load(text)
    validator = jsonschema.Draft202012Validator(schema)
    errors = sorted(validator.iter_errors(document), key=lambda e: list(e.absolute_path))
    for error in errors:
        where = "/".join(str(p) for p in error.absolute_path) or "(top level)"
        print(f"{example_path.name}: {where}: {error.message}", file=sys.stderr)
    if errors:
        print(f"{example_path.name}: {len(errors)} schema error(s)", file=sys.stderr)
        return 1
    environments = document.get("environments") or {}
    profiles = sum(len((e or {}).get("profiles") or {}) for e in environments.values())
    print(f"validated {example_path.name} against the schema: {len(environments)} environments, {profiles} profiles")
    return 0


if __name__ == "__main__":
    sys.exit(main())
