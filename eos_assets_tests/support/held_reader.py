"""A reader of the serving database in a process of its own, holding one connection open.

``python -m eos_assets_tests.support.held_reader FILE`` opens ``FILE`` read-only as any SQL tool
would (``duckdb.connect(FILE, read_only=True)``), prints ``ready`` and then answers each SQL line on
stdin with one line of JSON: the rows, or ``{"error": ...}``. It keeps the connection until
stdin closes.
"""

import json
import sys

import duckdb


def main() -> int:
    """Serve queries on one read-only connection until stdin closes."""
    conn = duckdb.connect(sys.argv[1], read_only=True)
    print("ready", flush=True)
    for line in sys.stdin:
        try:
            answer: object = conn.execute(line).fetchall()
        except duckdb.Error as exc:
            answer = {"error": str(exc)}
        print(json.dumps(answer, default=str), flush=True)
    conn.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
