"""Reads a `ust export --format parquet` directory with DuckDB (PyPI `duckdb`) and prints,
per file, as JSON: the event class (the file's key-value metadata `ctf.event_class`), the
row count, and the sum of every integer column (as decimal text: DuckDB sums into a
128-bit integer).

Usage: parquet_sums.py OUTDIR
"""
import glob
import json
import os
import sys

import duckdb


def main():
    out = {}
    con = duckdb.connect()
    for f in sorted(glob.glob(os.path.join(sys.argv[1], "*.parquet"))):
        kv = con.execute("SELECT value FROM parquet_kv_metadata(?) WHERE key = 'ctf.event_class'", [f]).fetchone()
        name = kv[0].decode() if isinstance(kv[0], (bytes, bytearray)) else kv[0]
        cols = con.execute("DESCRIBE SELECT * FROM read_parquet(?)", [f]).fetchall()
        ints = [c[0] for c in cols if c[1] in ("BIGINT", "UBIGINT")]
        select = ", ".join(["count(*)"] + ['CAST(sum("%s") AS VARCHAR)' % c.replace('"', '""') for c in ints])
        row = con.execute("SELECT %s FROM read_parquet(?)" % select, [f]).fetchone()
        if name in out:
            sys.exit("two files for event class %r" % name)
        out[name] = {"file": os.path.basename(f), "count": row[0], "sums": {c: v for c, v in zip(ints, row[1:])}, "columns": [c[0] for c in cols]}
    json.dump(out, sys.stdout)


main()
