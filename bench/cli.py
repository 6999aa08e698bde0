"""The `context-governance` command's latency: `python -m bench.cli [--runs 40]`.

A fresh database with the demo's approved limit for claude-sonnet-4, served by gunicorn on
loopback. Each measure starts the command as Claude Code does, a new process fed JSON on
stdin, `--runs` times, and reports p50, p95 and the slowest run, beside the bare interpreter
start (`python -c pass`) measured in the same run:

- statusline, warm: the limit is in the local cache (no HTTP);
- statusline, cold: no cache, one GET on loopback;
- statusline, server down: the cache has expired and nothing listens (stale line);
- hook pre-compact: one POST on loopback, the default time budget, no new transcript lines;
- hook pre-compact with 20 KB, then 1 MB, appended to the transcript before each run (the
  lines are sent after the event within their own 0.1 s budget; what does not fit waits);
- hook pre-compact, server down (connection refused: spooled);
- hook pre-compact, server hung (accepts, never answers: the budget ends it; spooled).

Writes the section "CLI: status line and hooks" of bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.common import write_section
from bench.traces import fresh_database

ROOT = Path(__file__).resolve().parent.parent
DB = os.environ.get("BENCH_CLI_DB", "gov_cli_bench")
MODEL_ID = "claude-sonnet-4-20250514"


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _seed_child() -> None:
    """In its own process: users, the qualification demo (an approved limit), a token."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "governance.settings")
    import django

    django.setup()
    from governance.models import Role, Workspace
    from governance.services import api_token_create, membership_set, user_get_or_create
    from qualification import demo

    workspace = Workspace.objects.get(slug="bench")
    users = {}
    for name, role in (("editor", Role.EDITOR), ("reviewer", Role.REVIEWER)):
        users[name] = user_get_or_create(username=f"bench-{name}", password="bench-pass-1")
        membership_set(workspace=workspace, user=users[name], role=role)
    demo.seed(workspace=workspace, users=users, stdout=sys.stderr)
    print(api_token_create(workspace=workspace, user=users["editor"], name="bench").plaintext)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_until_serving(base: str, token: str) -> None:
    """Until both workers have loaded Django and answered the endpoint the command calls."""
    import urllib.request

    request = urllib.request.Request(
        f"{base}/api/v1/operating-limits/active/?model={MODEL_ID}",
        headers={"Authorization": f"Bearer {token}"},
    )
    answered = 0
    for _ in range(300):
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                response.read()
            answered += 1
            if answered >= 10:
                return
        except OSError:
            time.sleep(0.2)
    raise SystemExit(f"{base} did not answer")


def status_input(transcript: Path) -> bytes:
    return json.dumps(
        {
            "session_id": "bench-session",
            "transcript_path": str(transcript),
            "cwd": str(ROOT),
            "model": {"id": MODEL_ID, "display_name": "Sonnet 4"},
            "workspace": {"current_dir": str(ROOT), "project_dir": str(ROOT)},
            "cost": {"total_cost_usd": 4.12},
            "context_window": {
                "context_window_size": 200_000,
                "current_usage": {
                    "input_tokens": 12,
                    "output_tokens": 300,
                    "cache_creation_input_tokens": 1_988,
                    "cache_read_input_tokens": 140_000,
                },
            },
        }
    ).encode()


def append_lines(path: Path, calls: int, start: int) -> int:
    """Append `calls` calls (a 5,000-character user line and an assistant line each, with
    unique message ids) to the transcript; returns the next call's number."""
    usage = {"input_tokens": 5, "cache_creation_input_tokens": 1_000,
             "cache_read_input_tokens": 150_000, "output_tokens": 200}  # fmt: skip
    with path.open("a") as handle:
        for index in range(start, start + calls):
            handle.write(json.dumps({"type": "user", "sessionId": "bench-session",
                                     "message": {"content": "x" * 5_000}}) + "\n")  # fmt: skip
            handle.write(json.dumps({"type": "assistant", "sessionId": "bench-session",
                                     "uuid": f"a{index}", "requestId": f"r{index}",
                                     "message": {"id": f"m{index}", "usage": usage,
                                                 "model": MODEL_ID}}) + "\n")  # fmt: skip
    return start + calls


def write_transcript(path: Path) -> Path:
    """A 2 MB transcript whose last main call held 151k tokens: the pre-compact hook reads
    its tail for the context size."""
    usage = {"input_tokens": 5, "cache_creation_input_tokens": 1_000,
             "cache_read_input_tokens": 150_000, "output_tokens": 200}  # fmt: skip
    with path.open("w") as handle:
        for index in range(400):
            handle.write(json.dumps({"type": "user", "message": {"content": "x" * 5_000}}) + "\n")
            handle.write(json.dumps({"type": "assistant", "uuid": str(index),
                                     "message": {"usage": usage}}) + "\n")  # fmt: skip
    return path


UNEXPECTED: dict[str, int] = {}


def run_many(
    args: list[str], stdin: bytes, env: dict, runs: int, before=None, expect=None, name=""
) -> list[float]:
    """Wall milliseconds of `runs` starts of the command; `before` runs before each, untimed;
    runs whose output fails `expect` are counted in UNEXPECTED[name]."""
    samples = []
    for _ in range(runs):
        if before:
            before()
        start = time.perf_counter()
        result = subprocess.run(
            [sys.executable, *args], input=stdin, capture_output=True, env=env, cwd=ROOT
        )
        samples.append(1000 * (time.perf_counter() - start))
        if result.returncode != 0:
            raise SystemExit(f"{args} exited {result.returncode}: {result.stderr.decode()}")
        if expect and not expect(result):
            UNEXPECTED[name] = UNEXPECTED.get(name, 0) + 1
    return samples


def run_interleaved(
    commands: dict[str, tuple[list[str], dict]], stdin: bytes, runs: int, expect=None
) -> dict[str, list[float]]:
    """Round-robin starts of each command (`label: (argv, env)`), `runs` each, so that the
    machine's load falls on all of them alike; wall milliseconds per label."""
    samples: dict[str, list[float]] = {label: [] for label in commands}
    for _ in range(runs):
        for label, (argv, env) in commands.items():
            start = time.perf_counter()
            program = argv[0].startswith("/") and os.access(argv[0], os.X_OK)
            command = argv if program else [sys.executable, *argv]
            result = subprocess.run(command, input=stdin, capture_output=True, env=env,
                                    cwd=ROOT)  # fmt: skip
            samples[label].append(1000 * (time.perf_counter() - start))
            if result.returncode != 0 or (expect and argv[-1] == "statusline"
                                          and not expect(result)):  # fmt: skip
                UNEXPECTED[label] = UNEXPECTED.get(label, 0) + 1
    return samples


def old_package(scratch: Path) -> tuple[Path, str]:
    """The command as it was before issue 19's start-up work (the merge base with main)."""
    base = subprocess.run(["git", "merge-base", "HEAD", "main"], cwd=ROOT, check=True,
                          capture_output=True, text=True).stdout.strip()  # fmt: skip
    target = scratch / "old"
    target.mkdir()
    archive = subprocess.run(["git", "archive", base, "context_governance_cli", "numfmt"],
                             cwd=ROOT, check=True, capture_output=True).stdout  # fmt: skip
    subprocess.run(["tar", "-x", "-C", str(target)], input=archive, check=True)
    return target, base[:10]


SCRIPT = (  # what pip writes as the `context-governance` console script
    "import sys\nfrom context_governance_cli.main import main\n"
    "if __name__ == '__main__':\n    sys.exit(main())\n"
)


def p95(samples: list[float]) -> float:
    return statistics.quantiles(samples, n=20, method="inclusive")[18]


def cmp_row(label: str, samples: list[float], floor: list[float]) -> str:
    over = statistics.median(samples) - statistics.median(floor)
    return (
        f"| {label} | {len(samples)} | {statistics.median(samples):.1f} ms | "
        f"**{p95(samples):.1f} ms** | {over:+.1f} ms |"
    )


def ratio(after: list[float], before: list[float]) -> str:
    return f"{statistics.median(after) / statistics.median(before):.2f}×"


def over_ratio(after, before, floor) -> str:
    base = statistics.median(floor)
    above = statistics.median(before) - base
    if above <= 0:
        return "n/a (before is at the floor)"
    return f"{(statistics.median(after) - base) / above:.2f}×"


def row(label: str, samples: list[float], target: str) -> str:
    return (
        f"| {label} | {len(samples)} | {statistics.median(samples):.0f} ms | "
        f"**{p95(samples):.0f} ms** | {max(samples):.0f} ms | {target} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--compare-runs", type=int, default=50,
                        help="starts of each command in the before/after comparison")  # fmt: skip
    parser.add_argument(
        "--compare",
        action="store_true",
        help="only the warm status line before/after (no server, no database)",
    )
    args = parser.parse_args()
    if args.compare:
        compare_warm(args.compare_runs)
        return
    url = fresh_database(DB)
    env = {**os.environ, "DATABASE_URL": url, "DJANGO_SECURE_SSL_REDIRECT": "0",
           "GOVERNANCE_LOG_LEVEL": "WARNING", "DJANGO_STATIC_MANIFEST": "0"}  # fmt: skip
    env.pop("CELERY_BROKER_URL", None)  # the demo's analyses run in-process
    token = subprocess.run(
        [sys.executable, "-m", "bench.cli", "_seed"], cwd=ROOT, env=env, check=True,
        capture_output=True, text=True,
    ).stdout.strip().splitlines()[-1]  # fmt: skip
    port = free_port()
    # With a broker (as deployed), the derive step the transcript lines queue leaves the
    # request; no worker runs here, and the queue is purged at the end.
    broker = os.environ.get("CELERY_BROKER_URL", "")
    server_env = {**env, "CELERY_BROKER_URL": broker} if broker else env
    server = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "governance.wsgi", "--bind", f"127.0.0.1:{port}",
         "--workers", "2", "--log-level", "warning"],
        cwd=ROOT, env=server_env,
    )  # fmt: skip
    hung = socket.socket()  # listens, never accepts: connections succeed, answers never come
    hung.bind(("127.0.0.1", 0))
    hung.listen(1024)
    scratch = Path(tempfile.mkdtemp(prefix="bench-cli-"))
    try:
        base = f"http://127.0.0.1:{port}"
        wait_until_serving(base, token)
        client_env = {
            "PATH": os.environ["PATH"],
            "HOME": str(scratch),
            "CONTEXT_GOVERNANCE_URL": base,
            "CONTEXT_GOVERNANCE_TOKEN": token,
            "CONTEXT_GOVERNANCE_CONFIG_DIR": str(scratch / "config"),
            "CONTEXT_GOVERNANCE_CACHE_DIR": str(scratch / "cache"),
            "CLAUDE_CONFIG_DIR": str(scratch / ".claude"),
        }
        transcript = write_transcript(scratch / "transcript.jsonl")
        status = status_input(transcript)
        hook = json.dumps({"session_id": "bench-session", "transcript_path": str(transcript),
                           "cwd": str(ROOT), "hook_event_name": "PreCompact",
                           "trigger": "auto", "custom_instructions": ""}).encode()  # fmt: skip
        command = ["-m", "context_governance_cli"]
        # The machine is shared and loaded: measure the answer's real latency, not the default
        # 0.5 s give-up, and count the lines that did show the limit.
        client_env["CONTEXT_GOVERNANCE_TIMEOUT"] = "5"
        check = subprocess.run([sys.executable, *command, "statusline"], input=status,
                               capture_output=True, env=client_env, cwd=ROOT)  # fmt: skip
        line = check.stdout.decode().strip()
        log(f"line: {line}")
        assert "limit " in line, line
        runs = args.runs
        floor = run_many(["-c", "pass"], b"", client_env, runs)

        def drop_cache():
            shutil.rmtree(scratch / "cache", ignore_errors=True)

        def expire_cache():
            path = scratch / "cache" / "limits.json"
            cache = json.loads(path.read_text())
            for entry in cache.values():
                entry["fetched_at"] = 0
            path.write_text(json.dumps(cache))

        def shows_limit(result):
            return b"limit " in result.stdout and b"stale" not in result.stdout

        def shows_stale(result):
            return b"(stale)" in result.stdout

        def sent(result):
            return result.stderr == b""

        def spooled(result):
            return b"not sent" in result.stderr

        warm = run_many([*command, "statusline"], status, client_env, runs, expect=shows_limit,
                        name="warm")  # fmt: skip
        cold = run_many([*command, "statusline"], status, client_env, runs, before=drop_cache,
                        expect=shows_limit, name="cold")  # fmt: skip
        subprocess.run([sys.executable, *command, "statusline"], input=status,
                       env=client_env, cwd=ROOT, capture_output=True)  # fmt: skip
        down_env = {**client_env, "CONTEXT_GOVERNANCE_URL": f"http://127.0.0.1:{free_port()}"}
        # Same cache key for the down URL: copy the entry under it once, then expire each time.
        path = scratch / "cache" / "limits.json"
        cache = json.loads(path.read_text())
        path.write_text(json.dumps({k.replace(base, down_env["CONTEXT_GOVERNANCE_URL"], 1): v
                                    for k, v in cache.items()}))  # fmt: skip
        stale_line = subprocess.run([sys.executable, *command, "statusline"], input=status,
                                    env=down_env, cwd=ROOT, capture_output=True)  # fmt: skip
        log(f"stale line: {stale_line.stdout.decode().strip()}")
        stale = run_many([*command, "statusline"], status, down_env, runs, before=expire_cache,
                         expect=shows_stale, name="stale")  # fmt: skip
        hook_env = {k: v for k, v in client_env.items() if k != "CONTEXT_GOVERNANCE_TIMEOUT"}
        # The 2 MB transcript is a backlog at first: send it all once, untimed.
        subprocess.run([sys.executable, *command, "hook", "pre-compact"], input=hook,
                       env={**hook_env, "CONTEXT_GOVERNANCE_LINES_TIMEOUT": "60"}, cwd=ROOT,
                       capture_output=True, check=True)  # fmt: skip
        hook_up = run_many([*command, "hook", "pre-compact"], hook, hook_env, runs, expect=sent,
                           name="hook")  # fmt: skip
        counter = [0]

        def append(calls):
            def before():
                counter[0] = append_lines(transcript, calls, counter[0])

            return before

        left = scratch / "cache" / "transcripts.json"

        def offset():
            return max(v["offset"] for v in json.loads(left.read_text()).values())

        hook_small = run_many([*command, "hook", "pre-compact"], hook, hook_env, runs,
                              before=append(4), expect=sent, name="hook +20 KB")  # fmt: skip
        small_behind = transcript.stat().st_size - offset()
        subprocess.run([sys.executable, *command, "hook", "pre-compact"], input=hook,
                       env={**hook_env, "CONTEXT_GOVERNANCE_LINES_TIMEOUT": "60"}, cwd=ROOT,
                       capture_output=True, check=True)  # fmt: skip
        hook_large = run_many([*command, "hook", "pre-compact"], hook, hook_env, runs,
                              before=append(200), expect=sent, name="hook +1 MB")  # fmt: skip
        large_behind = transcript.stat().st_size - offset()
        hook_down = run_many([*command, "hook", "pre-compact"], hook, down_env, runs,
                             expect=spooled, name="hook down")  # fmt: skip
        hung_env = {**client_env,
                    "CONTEXT_GOVERNANCE_URL": f"http://127.0.0.1:{hung.getsockname()[1]}"}  # fmt: skip
        hook_hung = run_many([*command, "hook", "pre-compact"], hook, hung_env, runs,
                             expect=spooled, name="hook hung")  # fmt: skip
    finally:
        server.terminate()
        server.wait(timeout=30)
        hung.close()
        shutil.rmtree(scratch, ignore_errors=True)
        if broker:
            subprocess.run([sys.executable, "-m", "celery", "-A", "governance", "purge", "-f",
                            "-Q", "default,ingest,analysis,maintenance"], cwd=ROOT,
                           env=server_env, capture_output=True)  # fmt: skip
    load = os.getloadavg()
    body = f"""
Each run starts a new process (`python -m context_governance_cli …`, as Claude Code starts
the installed `context-governance` script), feeds it the JSON on stdin and waits for it to
exit. The server is gunicorn (2 workers) on loopback with the demo's approved limit for
`claude-sonnet-4`; the status input names `{MODEL_ID}`. The machine is shared: load average
{load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} (1 / 5 / 15 min) when the run ended. Printed line:
`{line}`.

| Measure | n | p50 | p95 | slowest | Target |
|---|---|---|---|---|---|
{row("Interpreter start alone (`python -c pass`), the floor", floor, "–")}
{row("`statusline`, warm cache (no HTTP)", warm, "p95 < 50 ms")}
{row("`statusline`, cold (no cache: one GET on loopback)", cold, "p95 < 200 ms")}
{row("`statusline`, cache expired and server down (stale line)", stale, "–")}
{row("`hook pre-compact`, one POST on loopback (transcript tail read: 2 MB file), no new lines", hook_up, "≤ 300 ms")}
{row("`hook pre-compact`, 20 KB of lines appended before each run (sent after the event)", hook_small, "≤ 300 ms")}
{row("`hook pre-compact`, 1 MB of lines appended before each run (0.1 s of chunks; the rest later)", hook_large, "≤ 300 ms")}
{row("`hook pre-compact`, server down (refused; spooled)", hook_down, "≤ 300 ms")}
{row("`hook pre-compact`, server hung (accepts, never answers; spooled)", hook_hung, "≤ 300 ms")}

Bytes of the transcript not yet sent after the last run: {small_behind:,} with 20 KB
appended per run, {large_behind:,} with 1 MB per run (the lines' budget bounds each hook;
a transcript growing faster than the hooks' budgets send falls behind until a quieter
stretch, or `ingest`).

The server {"had a broker (" + broker + "; no worker: the queued derive steps were purged)" if broker else "had no broker: the derive step ran in the lines' requests"}.

Runs whose output was not the expected one (a line without the limit, a hook not sent
within its budget, …): {UNEXPECTED or "none"}. The status-line runs here wait up to 5 s for
the server (`CONTEXT_GOVERNANCE_TIMEOUT=5`) so that the cold figure is the real round trip;
the default gives up after 0.5 s. The hooks run with their default
budget.

The hook's budget is 0.15 s for the whole request (`CONTEXT_GOVERNANCE_HOOK_TIMEOUT`), so a
hung server costs the interpreter start, the imports and about 150 ms. The warm status line
is the interpreter start plus its few imports and reading the cache and the Claude settings
files. The interpreter start here includes the development install's editable-package
finder (`site`), which a regular `pip install` does not have: compare the rows without site
above.
"""
    write_section("CLI: status line and hooks", body, command="python -m bench.cli")
    log(body)


def compare_warm(runs: int) -> None:
    """The warm status line before and after issue 19's start-up work, in one run."""
    scratch = Path(tempfile.mkdtemp(prefix="bench-cli-compare-"))
    try:
        env = {
            "PATH": os.environ["PATH"],
            "HOME": str(scratch),
            "CONTEXT_GOVERNANCE_URL": "http://127.0.0.1:9",  # never asked: the cache is warm
            "CONTEXT_GOVERNANCE_TOKEN": "bench-token",
            "CONTEXT_GOVERNANCE_CONFIG_DIR": str(scratch / "config"),
            "CONTEXT_GOVERNANCE_CACHE_DIR": str(scratch / "cache"),
            "CLAUDE_CONFIG_DIR": str(scratch / ".claude"),
        }
        sys.path.insert(0, str(ROOT))
        from context_governance_cli import config, statusline

        settings = config.Settings(url=env["CONTEXT_GOVERNANCE_URL"], token="bench-token",
                                   source="")  # fmt: skip
        answer = {"model_id": MODEL_ID, "version": "1", "candidates": 1,
                  "limit": {"max_context_tokens": 96_000, "reserve_tokens": 9_600,
                            "ecl_tokens": 128_000}}  # fmt: skip
        config.write_cache_json(
            scratch / "cache" / "limits.json",
            {statusline._cache_key(settings, MODEL_ID): {
                "fetched_at": time.time() + 10 * 365 * 86400, "version": "1", "answer": answer}},
        )  # fmt: skip
        transcript = write_transcript(scratch / "transcript.jsonl")
        status = status_input(transcript)
        old_dir, old_rev = old_package(scratch)
        script = scratch / "context-governance"
        script.write_text(SCRIPT)
        new_env = {**env, "PYTHONPATH": str(ROOT)}
        old_env = {**env, "PYTHONPATH": str(old_dir)}
        lines = {}
        for label, run_env in (("before", old_env), ("after", new_env)):
            lines[label] = subprocess.run(
                [sys.executable, str(script), "statusline"], input=status, env=run_env,
                capture_output=True, check=True,
            ).stdout.decode().strip()  # fmt: skip
            log(f"{label}: {lines[label]}")
        assert lines["before"] == lines["after"] and "limit 96k" in lines["after"], lines

        def shows_limit(result):
            return result.stdout.decode().strip() == lines["after"]

        # Regular installs: a venv each (no editable finder, no .pth files), the package
        # copied into its site-packages and the console script in its bin, as pip lays out.
        venvs = {}
        for label, source in (("old", old_dir), ("new", ROOT)):
            venv = scratch / f"venv-{label}"
            subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)],
                           check=True)  # fmt: skip
            (site_packages,) = venv.glob("lib/python3*/site-packages")
            for package in ("context_governance_cli", "numfmt"):
                shutil.copytree(source / package, site_packages / package,
                                ignore=shutil.ignore_patterns("__pycache__"))  # fmt: skip
            installed = venv / "bin" / "context-governance"
            installed.write_text(f"#!{venv / 'bin' / 'python'}\n{SCRIPT}")
            installed.chmod(0o755)
            venvs[label] = (venv / "bin" / "python", installed)
        plain = {k: v for k, v in env.items() if k != "PYTHONPATH"}
        compare = run_interleaved({
            "floor venv": ([str(venvs["new"][0]), "-c", "pass"], plain),
            "new venv": ([str(venvs["new"][1]), "statusline"], plain),
            "old venv": ([str(venvs["old"][1]), "statusline"], plain),
            "floor": (["-c", "pass"], env),
            "floor -S": (["-S", "-c", "pass"], env),
            "new": ([str(script), "statusline"], new_env),
            "old": ([str(script), "statusline"], old_env),
            "new -S": (["-S", str(script), "statusline"], new_env),
            "old -S": (["-S", str(script), "statusline"], old_env),
        }, status, runs, expect=shows_limit)  # fmt: skip
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    load = os.getloadavg()
    body = f"""
The warm status line (the limit in the local cache, no HTTP) before and after issue 19's
start-up work, measured in one run: {runs} starts of each command, round-robin, so that the
machine's load falls on all of them alike. Each start is the installed console script's form
(`from context_governance_cli.main import main`, as pip writes it; no `-m`), fed the same
status JSON; "before" is the package at `{old_rev}`, "after" this branch. Both printed
`{lines["after"]}`. First as a regular install: a fresh venv per version with the package
copied into its site-packages and the console script in its bin, run as Claude Code runs it.
Then in this development venv (whose `site` loads an editable-install finder and a
coverage hook), with and without `site` (`python -S`). The machine is shared: load average {load[0]:.1f} / {load[1]:.1f} /
{load[2]:.1f} (1 / 5 / 15 min) when the run ended.

| Measure | n | p50 | p95 | p50 over the floor |
|---|---|---|---|---|
{cmp_row("Regular install (a venv, package in site-packages): interpreter start, floor", compare["floor venv"], compare["floor venv"])}
{cmp_row("Regular install: `context-governance statusline` warm, before", compare["old venv"], compare["floor venv"])}
{cmp_row("Regular install: `context-governance statusline` warm, after", compare["new venv"], compare["floor venv"])}
{cmp_row("Development venv: interpreter start (`python -c pass`), floor", compare["floor"], compare["floor"])}
{cmp_row("`statusline` warm, before", compare["old"], compare["floor"])}
{cmp_row("`statusline` warm, after", compare["new"], compare["floor"])}
{cmp_row("Interpreter start without site (`python -S -c pass`), floor", compare["floor -S"], compare["floor -S"])}
{cmp_row("`statusline` warm without site, before", compare["old -S"], compare["floor -S"])}
{cmp_row("`statusline` warm without site, after", compare["new -S"], compare["floor -S"])}

- Regular install, medians after / before: {ratio(compare["new venv"], compare["old venv"])};
  time above the floor after / before:
  {over_ratio(compare["new venv"], compare["old venv"], compare["floor venv"])}.
- Development venv, medians after / before: {ratio(compare["new"], compare["old"])} with site,
  {ratio(compare["new -S"], compare["old -S"])} without.
- Time above the interpreter's own start, after / before:
  {over_ratio(compare["new"], compare["old"], compare["floor"])} with site,
  {over_ratio(compare["new -S"], compare["old -S"], compare["floor -S"])} without.
- Runs whose line differed: {UNEXPECTED or "none"}.

The warm path now imports `os`, `math`, `_json` (the C scanner behind `json.loads`, without
`json`, whose import brings `re` and `enum`), `_sha256` (the digest without OpenSSL's
`_hashlib`) and the package; no `pathlib`, `typing` or HTTP code (`tests/cli/test_units.py`
pins the list). What is left above the floor is reading the cache and the Claude settings
files and writing the line. The p95 target (< 50 ms) is for the whole start: on this
machine the bare interpreter's own start decides it.
"""
    write_section("CLI: warm status line, before and after (issue 19)", body,
                  command=f"python -m bench.cli --compare --compare-runs {runs}")  # fmt: skip
    log(body)


if __name__ == "__main__":
    if sys.argv[1:] == ["_seed"]:
        _seed_child()
    else:
        main()
