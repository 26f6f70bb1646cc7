"""Runs every test executable a cargo build made, several at once.

Reads cargo's JSON messages (`cargo test --no-run --message-format=json-render-diagnostics`) on
stdin and runs each test executable in it (libraries, binaries, integration tests and benches in
test mode) as `cargo test` would: from its package's directory, with no arguments. Most of the e2e
suites' time is spent waiting on apiservers, rotations and restarts, so running a few executables
side by side shortens the run; each keeps its own libtest threads.

Each executable's output goes to a log of its own, printed whole when it fails; a passing one
prints its summary line and wall time. Every executable runs even after one fails. One that runs
past the deadline is killed and counted as failed. Exits 1 if any failed.

Usage: test_lanes.py --lanes N --deadline SECONDS --logs DIR < cargo-messages.json
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path


@dataclass
class Executable:
    name: str
    path: str
    package_dir: str
    kind: str
    source_size: int


def executables(messages):
    """The test executables in cargo's messages, one per target."""
    found = {}
    for line in messages:
        line = line.strip()
        if not line.startswith("{"):
            continue
        msg = json.loads(line)
        if msg.get("reason") != "compiler-artifact" or not msg.get("executable"):
            continue
        if not msg["profile"]["test"]:
            continue
        target = msg["target"]
        kind = target["kind"][0]
        package_dir = os.path.dirname(msg["manifest_path"])
        package = os.path.basename(package_dir)
        name = f"{package}/{kind}/{target['name']}"
        try:
            size = os.path.getsize(target["src_path"])
        except OSError:
            size = 0
        found[name] = Executable(name, msg["executable"], package_dir, kind, size)
    return list(found.values())


def order(found):
    """Integration tests first, the largest sources first: the long suites start early, so the
    lanes end close together."""
    return sorted(found, key=lambda e: (e.kind != "test", -e.source_size, e.name))


def summary(log_text):
    lines = [line for line in log_text.splitlines() if line.startswith("test result:")]
    return lines[-1] if lines else "no test result line"


def run(executable, deadline, logs):
    log_path = Path(logs) / (executable.name.replace("/", "__") + ".log")
    env = dict(os.environ, CARGO_MANIFEST_DIR=executable.package_dir)
    env.setdefault("CARGO", "cargo")
    started = time.monotonic()
    with open(log_path, "w") as log:
        process = subprocess.Popen(
            [executable.path],
            cwd=executable.package_dir,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            code = process.wait(timeout=deadline)
            late = False
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, 9)
            process.wait()
            code, late = -9, True
    took = time.monotonic() - started
    text = log_path.read_text(errors="replace")
    return code, late, took, text


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lanes", type=int, default=3)
    parser.add_argument("--deadline", type=float, default=1200.0)
    parser.add_argument("--logs", default=None)
    args = parser.parse_args()
    logs = args.logs or tempfile.mkdtemp(prefix="test-lanes-")
    os.makedirs(logs, exist_ok=True)

    queue = order(executables(sys.stdin))
    if not queue:
        print("lanes: cargo's messages name no test executable", file=sys.stderr)
        return 1
    print(f"lanes: {len(queue)} test executables in {args.lanes} lanes, logs in {logs}", file=sys.stderr)
    lock = threading.Lock()
    failed = []
    started = time.monotonic()

    def lane():
        while True:
            with lock:
                if not queue:
                    return
                executable = queue.pop(0)
            code, late, took, text = run(executable, args.deadline, logs)
            with lock:
                if code == 0:
                    print(f"lanes: {executable.name} ok in {took:.1f} s: {summary(text)}", file=sys.stderr)
                else:
                    failed.append(executable.name)
                    why = f"killed at the {args.deadline:g} s deadline" if late else f"exit code {code}"
                    sys.stderr.write(text)
                    print(f"lanes: {executable.name} FAILED ({why}) after {took:.1f} s; its output is above", file=sys.stderr)
                sys.stderr.flush()

    threads = [threading.Thread(target=lane) for _ in range(max(1, args.lanes))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    print(f"lanes: all ran in {time.monotonic() - started:.0f} s", file=sys.stderr)
    if failed:
        print(f"lanes: {len(failed)} failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
