"""Tests of test_lanes.py: which executables it takes from cargo's messages, in what order, and
that a failing or overdue executable fails the run with its output shown."""

import contextlib
import io
import json
import os
import stat
import sys
import tempfile
import unittest
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_lanes  # noqa: E402


def artifact(package_dir, kind, name, executable, test=True, src_path="/nonexistent.rs"):
    return json.dumps(
        {
            "reason": "compiler-artifact",
            "manifest_path": f"{package_dir}/Cargo.toml",
            "target": {"kind": [kind], "name": name, "src_path": src_path},
            "profile": {"test": test},
            "executable": executable,
        }
    )


def script(directory, name, body):
    path = Path(directory) / name
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


class Executables(unittest.TestCase):
    def test_takes_test_executables_only_and_orders_integration_tests_by_size(self):
        with tempfile.TemporaryDirectory() as tmp:
            small = Path(tmp) / "small.rs"
            small.write_text("x")
            large = Path(tmp) / "large.rs"
            large.write_text("x" * 100)
            messages = [
                "not json: a rendered diagnostic",
                json.dumps({"reason": "build-finished", "success": True}),
                artifact("/w/crates/a", "lib", "a", "/t/a-lib"),
                artifact("/w/crates/a", "bin", "a", "/t/a-bin-plain", test=False),
                artifact("/w/crates/a", "lib", "a", None),
                artifact("/w/e2e", "test", "small", "/t/small", src_path=str(small)),
                artifact("/w/e2e", "test", "large", "/t/large", src_path=str(large)),
                artifact("/w/crates/b", "bench", "request", "/t/request"),
            ]
            found = test_lanes.order(test_lanes.executables(messages))
        self.assertEqual(
            [e.name for e in found],
            ["e2e/test/large", "e2e/test/small", "a/lib/a", "b/bench/request"],
        )
        self.assertEqual(found[0].package_dir, "/w/e2e")


class Run(unittest.TestCase):
    def run_main(self, messages, *args):
        stderr = io.StringIO()
        stdin = io.StringIO("\n".join(messages))
        with contextlib.redirect_stderr(stderr):
            old_argv, old_stdin = sys.argv, sys.stdin
            sys.argv, sys.stdin = ["test_lanes.py", *args], stdin
            try:
                code = test_lanes.main()
            finally:
                sys.argv, sys.stdin = old_argv, old_stdin
        return code, stderr.getvalue()

    def test_runs_each_from_its_package_and_fails_with_the_failing_output(self):
        with tempfile.TemporaryDirectory() as tmp:
            passing = script(tmp, "passing", 'echo "test result: ok. in $(pwd)"')
            failing = script(tmp, "failing", 'echo "assertion failed: the reason"; exit 101')
            code, out = self.run_main(
                [
                    artifact(tmp, "test", "passing", passing),
                    artifact(tmp, "test", "failing", failing),
                ],
                "--lanes",
                "2",
                "--logs",
                os.path.join(tmp, "logs"),
            )
        self.assertEqual(code, 1)
        self.assertIn(f"test result: ok. in {os.path.realpath(tmp)}", out)
        self.assertIn("assertion failed: the reason", out)
        self.assertIn("FAILED (exit code 101)", out)
        self.assertIn("1 failed: " + os.path.basename(tmp) + "/test/failing", out)

    def test_an_overdue_executable_is_killed_and_fails(self):
        with tempfile.TemporaryDirectory() as tmp:
            sleeper = script(tmp, "sleeper", "sleep 30")
            code, out = self.run_main(
                [artifact(tmp, "test", "sleeper", sleeper)],
                "--deadline",
                "0.5",
                "--logs",
                os.path.join(tmp, "logs"),
            )
        self.assertEqual(code, 1)
        self.assertIn("killed at the 0.5 s deadline", out)

    def test_no_executable_is_a_failure(self):
        code, out = self.run_main([json.dumps({"reason": "build-finished"})])
        self.assertEqual(code, 1)
        self.assertIn("no test executable", out)


if __name__ == "__main__":
    unittest.main()
