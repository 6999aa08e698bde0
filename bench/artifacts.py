"""Artifact store benchmark: 1 GB write, tail and range of 1 GB, search over 100 MB, peak RSS.

Runs the real services (redaction, fingerprint, line index, staging, publish, read log) on
a throwaway SQLite database and storage folder, and the same 1 GB write over HTTP: a raw
POST to gunicorn on loopback serving that database and folder. Baselines are measured in
the same run: `dd` copying the same file with fsync, `tail -n 100` and `grep -c` on the
stored file.

    .venv/bin/python -m bench.artifacts [--gb 1] [--search-mb 100] [--keep]
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.common import timed, write_section

ROOT = Path(__file__).resolve().parent.parent

LINE_WORDS = [
    "PASSED", "FAILED", "SKIPPED", "tests/api/test_checkout.py::test_total", "assert", "==",
    "error:", "warning:", "Compiling", "src/context/budget.rs", "0.127s", "Traceback", "File",
    '"/srv/app/governance/services.py",', "line", "in", "<module>", "retry", "upstream=billing",
    "status=503", "elapsed_ms=41", "token", "password", "https://example.org/path", "{'id': 42}",
]  # fmt: skip
SECRETS = [
    "AKIAIOSFODNN7EXAMPLE",
    "password=hunter2hunter2",
    "https://deploy:s3cr3tPass@registry.example/v2/",
    "Authorization: Bearer abcdefghijklmnopqrstuvwxyz012345",
]
NEEDLE = "needle-7f3a"


def make_log(path: Path, size: int, *, seed: int, needles: int = 0) -> None:
    """Log-like lines (with a secret every ~40 KB), repeated from a 4 MB block to `size`."""
    rng = random.Random(seed)
    lines = []
    block_size = 0
    while block_size < 4 * 1024 * 1024:
        words = [rng.choice(LINE_WORDS) for _ in range(rng.randint(3, 16))]
        if rng.random() < 0.002:
            words.append(rng.choice(SECRETS))
        line = f"[{len(lines):07d}] " + " ".join(words) + "\n"
        lines.append(line)
        block_size += len(line)
    block = "".join(lines).encode()
    piece_size = 256 * 1024
    with path.open("wb") as handle:
        written = 0
        placed = 0
        while written < size:
            offset = written % (len(block) - piece_size)
            piece = block[offset : offset + min(piece_size, size - written)]
            if needles and placed < needles and written >= placed * (size // needles):
                piece = f"found {NEEDLE} here\n".encode() + piece
                placed += 1
            handle.write(piece)
            written += len(piece)


def setup_django(root: Path) -> None:
    os.environ["DATABASE_URL"] = f"sqlite:///{root / 'bench.sqlite3'}"
    os.environ["GOVERNANCE_MEDIA_ROOT"] = str(root / "media")
    os.environ.pop("CELERY_BROKER_URL", None)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "governance.settings")
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0)


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def drop_file(path: Path) -> None:
    try:
        path.unlink()
    except FileNotFoundError:
        pass


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def proc_mb(pid: int, field: str) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) / 1024
    return 0.0


class Server:
    """gunicorn (one sync worker) on loopback, on the benchmark's database and storage."""

    def __init__(self):
        self.port = free_port()
        env = {**os.environ, "DJANGO_SECURE_SSL_REDIRECT": "0", "DJANGO_STATIC_MANIFEST": "0",
               "GOVERNANCE_LOG_LEVEL": "WARNING"}  # fmt: skip
        self.process = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "governance.wsgi", "--bind", f"127.0.0.1:{self.port}",
             "--workers", "1", "--log-level", "warning", "--timeout", "600"],
            cwd=ROOT, env=env,
        )  # fmt: skip
        deadline = time.monotonic() + 60
        while True:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    break
            except OSError:
                if time.monotonic() > deadline or self.process.poll() is not None:
                    self.stop()
                    raise RuntimeError("gunicorn did not start") from None
                time.sleep(0.2)

    @property
    def worker_pid(self) -> int:
        children = Path(f"/proc/{self.process.pid}/task/{self.process.pid}/children")
        return int(children.read_text().split()[0])

    def post(self, source: Path, *, token: str, call: str) -> dict:
        """A raw POST of the file, streamed in 1 MiB blocks; the pointer it answers."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=600, blocksize=1 << 20)
        with source.open("rb") as body:
            conn.request(
                "POST", "/api/v1/artifacts/", body=body,
                headers={"Authorization": f"Bearer {token}", "Content-Type": "text/plain",
                         "Content-Length": str(source.stat().st_size), "X-Run-Id": "bench",
                         "X-Tool-Call-Id": call, "X-Command": "generate 1 GB log"},
            )  # fmt: skip
            response = conn.getresponse()
            data = json.loads(response.read())
        conn.close()
        if response.status != 201:
            raise RuntimeError(f"HTTP write answered {response.status}: {data}")
        return data

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--gb", type=float, default=1.0, help="size of the big artifact")
    parser.add_argument("--search-mb", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=3, help="runs of the big write")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder")
    args = parser.parse_args()

    root = Path(tempfile.mkdtemp(prefix="bench-artifacts-"))
    try:
        setup_django(root)
        run(root, args)
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)


def http_token(workspace) -> str:
    from governance.models import Role
    from governance.services import api_token_create, membership_set, user_get_or_create

    user = user_get_or_create(username="bench-writer")
    membership_set(workspace=workspace, user=user, role=Role.EDITOR)
    return api_token_create(workspace=workspace, user=user, name="bench").plaintext


def measure_writes(root: Path, big: Path, workspace, server: Server, token: str, repeat: int):
    """Per attempt, in turn: `dd` of the file, the service write, the HTTP write."""
    from artifacts import services
    from artifacts.models import Artifact

    samples: dict[str, list[float]] = {"dd": [], "service": [], "http": []}
    artifact = None
    for attempt in range(repeat):
        copy = root / "dd-copy.log"
        start = time.perf_counter()
        subprocess.run(
            ["dd", f"if={big}", f"of={copy}", "bs=1M", "conv=fsync", "status=none"], check=True
        )
        samples["dd"].append(time.perf_counter() - start)
        drop_file(copy)
        if artifact is not None:
            services.artifact_delete(artifact=artifact, actor=None)
            services.artifacts_purge()
        start = time.perf_counter()
        with big.open("rb") as source:
            artifact = services.artifact_write(
                workspace=workspace,
                source=source,
                run_id="bench",
                tool_call_id=f"write-{attempt}",
                command="generate 1 GB log",
            )
        samples["service"].append(time.perf_counter() - start)
        start = time.perf_counter()
        pointer = server.post(big, token=token, call=f"http-{attempt}")
        samples["http"].append(time.perf_counter() - start)
        if pointer["sha256"] != artifact.sha256 or pointer["bytes"] != artifact.size_bytes:
            raise RuntimeError("the HTTP write stored different bytes from the service write")
        services.artifact_delete(artifact=Artifact.objects.get(pk=pointer["id"]), actor=None)
        services.artifacts_purge()
    return {"artifact": artifact, "samples": samples}


def spread(samples: list[float], mb: float) -> str:
    rates = sorted(mb / s for s in samples)
    return f"{rates[0]:,.0f}–{rates[-1]:,.0f}"


def run(root: Path, args) -> None:
    from django.core.files.storage import default_storage

    from artifacts import services
    from artifacts.models import Artifact
    from governance.services import workspace_create

    workspace = workspace_create(slug="bench", name="Bench")
    size = int(args.gb * 1024**3)
    big = root / "big.log"
    make_log(big, size, seed=1)
    small = root / "search.log"
    make_log(small, args.search_mb * 1024 * 1024, seed=2, needles=20)
    reader = services.Reader(via="api")
    token = http_token(workspace)
    load_before = os.getloadavg()
    server = Server()
    try:
        warm = root / "warm.log"
        warm.write_bytes(b"warm-up\n")
        services.artifact_delete(
            artifact=Artifact.objects.get(pk=server.post(warm, token=token, call="warm")["id"]),
            actor=None,
        )
        server_rss = proc_mb(server.worker_pid, "VmRSS")
        baseline_rss = rss_mb()
        write = measure_writes(root, big, workspace, server, token, args.repeat)
        http_peak = proc_mb(server.worker_pid, "VmHWM") - server_rss
    finally:
        server.stop()
    artifact = write["artifact"]
    write_peak = peak_mb() - baseline_rss
    mb = size / 1024**2
    stored = Path(default_storage.path(artifact.storage_name))

    # --- tail and range of 1 GB ---------------------------------------------
    services.artifact_policy_update(
        workspace=workspace, actor=None, max_read_bytes=64 * 1024 * 1024, max_read_lines=100_000
    )
    tail_s, _ = timed(
        lambda: services.artifact_read_tail(artifact=artifact, lines=100, reader=reader), 21
    )
    tail_cli, _ = timed(
        lambda: subprocess.run(["tail", "-n", "100", str(stored)], check=True, capture_output=True),
        21,
    )
    middle = artifact.line_count // 2
    range_s, _ = timed(
        lambda: services.artifact_read_range(
            artifact=artifact, reader=reader, start_line=middle, end_line=middle + 99
        ),
        21,
    )
    sed_cli, _ = timed(
        lambda: subprocess.run(
            ["sed", "-n", f"{middle},{middle + 99}p;{middle + 100}q", str(stored)],
            check=True,
            capture_output=True,
        ),
        3,
    )
    read_peak = peak_mb() - baseline_rss

    # --- search over 100 MB --------------------------------------------------
    with small.open("rb") as source:
        haystack = services.artifact_write(
            workspace=workspace, source=source, run_id="bench", tool_call_id="search",
            command="generate search corpus",
        )  # fmt: skip
    hay_path = Path(default_storage.path(haystack.storage_name))

    def search(q: str, regex: bool = False):
        result = services.artifact_search(
            artifact=haystack, reader=reader, q=q, is_regex=regex, context=2, max_matches=100
        )
        assert len(result.matches) == 20, len(result.matches)

    plain_s, _ = timed(lambda: search(NEEDLE), 5)
    regex_s, _ = timed(lambda: search(r"needle-[0-9a-f]{4}", regex=True), 5)
    grep_s, _ = timed(
        lambda: subprocess.run(["grep", "-c", NEEDLE, str(hay_path)], capture_output=True), 5
    )
    grep_e_s, _ = timed(
        lambda: subprocess.run(
            ["grep", "-cE", "needle-[0-9a-f]{4}", str(hay_path)], capture_output=True
        ),
        5,
    )
    search_peak = peak_mb() - baseline_rss

    samples = write["samples"]
    write_s, http_s, dd_s = (statistics.median(samples[k]) for k in ("service", "http", "dd"))
    rows = [
        ("Write 1 artifact through the service (redact, sha256, line index, stage, fsync, publish)",
         f"{mb / write_s:,.0f} MB/s ({write_s:.2f} s; runs {spread(samples['service'], mb)} MB/s)",
         "≥ 100 MB/s", f"`dd bs=1M conv=fsync`: {mb / dd_s:,.0f} MB/s "
         f"(runs {spread(samples['dd'], mb)})", f"{(mb / write_s) / (mb / dd_s):.2f}×"),
        ("Write 1 artifact over HTTP: raw POST to gunicorn on loopback (1 sync worker), "
         "same work plus auth, headers, socket reads",
         f"{mb / http_s:,.0f} MB/s ({http_s:.2f} s; runs {spread(samples['http'], mb)} MB/s)",
         "≥ 100 MB/s", "same `dd`", f"{(mb / http_s) / (mb / dd_s):.2f}×"),
        ("Tail 100 lines", f"{tail_s * 1000:.2f} ms", "< 50 ms",
         f"`tail -n 100`: {tail_cli * 1000:.2f} ms", f"{tail_s / tail_cli:.2f}×"),
        ("Range: 100 lines from the middle (line index)", f"{range_s * 1000:.2f} ms", "–",
         f"`sed -n` (scans): {sed_cli * 1000:,.0f} ms", f"{range_s / sed_cli:.4f}×"),
        (f"Search {args.search_mb} MB, plain text, 20 matches + context",
         f"{plain_s * 1000:.0f} ms", "< 1 s", f"`grep -c`: {grep_s * 1000:.0f} ms",
         f"{plain_s / grep_s:.2f}×"),
        (f"Search {args.search_mb} MB, regex", f"{regex_s * 1000:.0f} ms", "< 1 s",
         f"`grep -cE`: {grep_e_s * 1000:.0f} ms", f"{regex_s / grep_e_s:.2f}×"),
    ]  # fmt: skip
    table = ["| Operation | Ours (median) | Target | Baseline, same run | Ours / baseline |",
             "|---|---|---|---|---|"]  # fmt: skip
    table += [f"| {' | '.join(row)} |" for row in rows]
    load_after = os.getloadavg()
    cores = os.cpu_count() or 1
    dd_rates = [mb / s for s in samples["dd"]]
    busy = max(load_before[0], load_after[0]) > 0.5 * cores or max(dd_rates) > 1.3 * min(dd_rates)
    load = (
        f"Load average (1 min) {load_before[0]:.1f} before the writes and {load_after[0]:.1f} "
        f"after the searches, on {cores} cores."
    )
    if busy:
        load += (
            " The machine was running other work during this run, so the figures are noisy: "
            "read each against its same-run baseline, and see the per-run ranges."
        )
    body = f"""
Artifact: {size / 1024**3:.2f} GiB of log lines ({artifact.line_count:,} lines,
{artifact.redaction_count:,} secrets redacted on the way in, ≈{artifact.estimated_tokens:,}
tokens estimated). Writes: median of {args.repeat}, each run doing `dd`, the service write
and the HTTP write in turn; tail and range: median of 21; search: median of 5. The service
rows time the services (database row, read log included); the HTTP row times the client
from the first byte sent to the pointer received, and the server's answer is checked
against the service write (same sha256 and size). Storage: local folder on the same disk as
the input; the input is in the page cache. {load}

{chr(10).join(table)}

Peak RSS above the baseline ({baseline_rss:.0f} MB after setup, corpus generation and the
server's warm-up):
write {write_peak:.0f} MB, tail/range {read_peak:.0f} MB, search {search_peak:.0f} MB
(target < 100 MB each; the peak is cumulative, so each figure includes the ones before).
The gunicorn worker's peak RSS rose {http_peak:.0f} MB above its RSS after a warm-up request
({server_rss:.0f} MB) while it took the HTTP writes.
"""
    print(body)
    command = "python -m bench.artifacts " + " ".join(sys.argv[1:])
    write_section("artifacts", body, command=command.strip())


if __name__ == "__main__":
    main()
