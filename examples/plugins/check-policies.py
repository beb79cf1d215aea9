#!/usr/bin/env python3
"""Checks built example policies against policy-cases.json with the real host's `refract plugin
test`: the remote name, source, upstream and internal answer of every topic in the table, and the
error of every invalid config.

usage: examples/plugins/check-policies.py [--refract PATH] [POLICY.wasm ...]
(default: every examples/plugins/<lang>/policy.wasm; refract from $REFRACT or target/debug/refract)
"""

import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile

HERE = pathlib.Path(__file__).resolve().parent
CASES = json.loads((HERE / "policy-cases.json").read_text())


def plugin_test(refract, wasm, topics_file, config):
    command = [refract, "plugin", "test", str(wasm), "--input", str(topics_file)]
    command += ["--source-cluster", CASES["source_cluster"], "--target-cluster", CASES["target_cluster"]]
    for entry in config:
        command += ["--config", entry]
    return subprocess.run(command, capture_output=True, text=True)


def check(refract, wasm, work):
    failures = []
    topics = work / "topics.jsonl"
    topics.write_text("".join(json.dumps(case["topic"]) + "\n" for case in CASES["topics"]))
    run = plugin_test(refract, wasm, topics, CASES["cli_config"])
    answers = [json.loads(line) for line in run.stdout.splitlines() if line.startswith("{")]
    if run.returncode != 0 or len(answers) != len(CASES["topics"]):
        return [f"refract plugin test exited {run.returncode}:\n{run.stdout}{run.stderr}"]
    for case, answer in zip(CASES["topics"], answers):
        for field in ("remote", "source", "upstream", "internal"):
            if answer.get(field) != case[field]:
                failures.append(f"{case['topic']}: {field} is {answer.get(field)!r}, expected {case[field]!r}")
    one = work / "one.jsonl"
    one.write_text('"orders"\n')
    for case in CASES["invalid_configs"]:
        run = plugin_test(refract, wasm, one, case["cli_config"])
        expected = f"invalid config: {case['error']}"
        if run.returncode == 0 or expected not in run.stderr:
            failures.append(f"config {case['config_toml']!r}: expected {expected!r}, got:\n{run.stderr.strip()}")
    return failures


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--refract", default=os.environ.get("REFRACT", str(HERE.parents[1] / "target/debug/refract")))
    parser.add_argument("policies", nargs="*", type=pathlib.Path)
    args = parser.parse_args()
    policies = args.policies or sorted(HERE.glob("*/policy.wasm"))
    if not policies:
        sys.exit("no policy.wasm found: build the examples first")
    bad = 0
    with tempfile.TemporaryDirectory() as tmp:
        for wasm in policies:
            failures = check(args.refract, wasm, pathlib.Path(tmp))
            print(f"{'ok  ' if not failures else 'FAIL'} {wasm}")
            for failure in failures:
                print(f"     {failure}")
            bad += bool(failures)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
