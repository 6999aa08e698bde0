"""Reading OTLP log requests in process, this code against older code, alternating:
`python -m bench.telemetry_decode --baseline-root DIR [--batches 11] [--repeat 5]`.

Each run is a fresh process whose working directory is the code under test: it decodes
and normalises 500-record batches of Claude Code `api_request` events (identity hashed,
the default policy) from protobuf and from OTLP/JSON (the same requests, as
`json_format.MessageToJson` writes them), and reports records per second for each. No
database: the reading only (decode, redaction, attribute reading, event records). Writes
medians, ratios and the load to bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

from bench.traces import ROOT, log

RUN = r"""
import json, os, sys, time
sys.path.insert(0, os.getcwd())
import traces.formats.telemetry as T
sys.path.insert(0, sys.argv[1])
from google.protobuf import json_format
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from bench.telemetry import log_bodies
protobuf = log_bodies(int(sys.argv[2]))
documents = [json_format.MessageToJson(ExportLogsServiceRequest.FromString(b)).encode()
             for b in protobuf]
decode = getattr(T, "decode_logs", None) or (lambda b, t: T.decode(b, t, "logs"))
out = {}
for kind, bodies, content_type in (("protobuf", protobuf, "application/x-protobuf"),
                                   ("json", documents, "application/json")):
    T.normalise_logs(decode(bodies[0], content_type), "hash", "bench")  # warm
    start = time.perf_counter()
    events = 0
    for body in bodies:
        events += len(T.normalise_logs(decode(body, content_type), "hash", "bench").events)
    out[kind] = len(bodies) * 500 / (time.perf_counter() - start)
    out[kind + "_events"] = events
print(json.dumps(out))
"""


def run_once(root: str, batches: int) -> dict:
    load = os.getloadavg()[0]
    out = subprocess.run(
        [sys.executable, "-c", RUN, str(ROOT), str(batches)],
        cwd=root, check=True, capture_output=True, text=True,
    ).stdout  # fmt: skip
    result = json.loads(out.strip().splitlines()[-1])
    result["load"] = (load, os.getloadavg()[0])
    return result


def main() -> None:
    from bench.common import write_section

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline-root", required=True)
    parser.add_argument("--batches", type=int, default=11)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    command = "python -m bench.telemetry_decode " + " ".join(sys.argv[1:])
    new, old = [], []
    for attempt in range(args.repeat):
        new.append(run_once(str(ROOT), args.batches))
        old.append(run_once(args.baseline_root, args.batches))
        log(f"pair {attempt + 1}: this {new[-1]} / baseline {old[-1]}")
    rows = ["| Encoding | This code, median | Baseline, median | This ÷ baseline, median of the pairs |",
            "|---|---|---|---|"]  # fmt: skip
    for kind, label in (("protobuf", "protobuf"), ("json", "OTLP/JSON")):
        ratios = [a[kind] / b[kind] for a, b in zip(new, old, strict=True)]
        rows.append(
            f"| {label} | {statistics.median(r[kind] for r in new):,.0f} records/s "
            f"(runs: {', '.join(f'{r[kind]:,.0f}' for r in new)}) | "
            f"{statistics.median(r[kind] for r in old):,.0f} records/s "
            f"(runs: {', '.join(f'{r[kind]:,.0f}' for r in old)}) | "
            f"**{statistics.median(ratios):.2f}×** (pairs: {', '.join(f'{x:.2f}' for x in ratios)}) |"
        )
    records = args.batches * 500
    body = "\n".join(rows) + (
        f"\n\n{records:,} `api_request` records per encoding and run, identity hashed; "
        f"events read per run: this {new[0]['protobuf_events']:,} / {new[0]['json_events']:,}, "
        f"baseline {old[0]['protobuf_events']:,} / {old[0]['json_events']:,} (protobuf / JSON). "
        f"Baseline: the code in `{args.baseline_root}`. One-minute load average at the start "
        "and end of each run (this, baseline): "
        + ", ".join(
            f"{a['load'][0]:.1f}→{a['load'][1]:.1f} / {b['load'][0]:.1f}→{b['load'][1]:.1f}"
            for a, b in zip(new, old, strict=True)
        )
        + f" on {os.cpu_count()} cores shared with other work: compare the paired ratio."
    )
    write_section("OTLP logs reading in process against the older code", body, command=command)
    print(body)


if __name__ == "__main__":
    main()
