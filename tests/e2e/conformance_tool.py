#!/usr/bin/env python3
# ruff: noqa
# fmt: off
# Lines 2-4 are ours; every other line is shared/tools/conformance.py verbatim (checked by a test).
"""Run conformance cases against the product's CLI, as a user would.

usage: conformance.py CLI CASES_DIR [--only NAME] [--kinds runtime,resume,meta,discovery]
  CLI        the workflow-mcp executable
  CASES_DIR  a folder with runtime/, meta/, discovery/ (shared/conformance or heldout/)
Prints one line per failing case and a last line 'N passed, M failed'. Exit 0 if all pass.
"""
import json, os, re, subprocess, sys, tempfile, pathlib, shutil

def run_cli(cli, argv, cwd, env=None, timeout=120):
    e = dict(os.environ)
    if env:
        e.update(env)
    p = subprocess.run([cli, *argv], cwd=cwd, env=e, capture_output=True, text=True, timeout=timeout)
    return p.returncode, p.stdout, p.stderr

def events_of(stderr):
    out = []
    for line in stderr.splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                out.append(json.loads(line))
            except ValueError:
                pass
    return out

def runtime_case(cli, case_dir):
    case = json.loads((case_dir / "case.json").read_text())
    exp = case["expect"]
    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        for rel, text in case.get("files", {}).items():
            f = tmp / rel
            f.parent.mkdir(parents=True, exist_ok=True)
            f.write_text(text)
        wf = tmp / "workflow.js"
        shutil.copy(case_dir / "workflow.js", wf)
        argv = ["run", str(wf), "--provider", "fake", "--events", "jsonl"]
        if "fake" in case:
            (tmp / "fake.json").write_text(json.dumps(case["fake"]))
            argv += ["--fake-script", str(tmp / "fake.json")]
        if "args" in case:
            (tmp / "args.json").write_text(json.dumps(case["args"]))
            argv += ["--args-file", str(tmp / "args.json")]
        opts = case.get("options", {})
        if "concurrency" in opts: argv += ["--concurrency", str(opts["concurrency"])]
        if "tokenBudget" in opts: argv += ["--token-budget", str(opts["tokenBudget"])]
        if "syncTimeoutMs" in opts: argv += ["--sync-timeout-ms", str(opts["syncTimeoutMs"])]
        env = {"HOME": str(tmp / "home"), "WORKFLOW_MCP_HOME": str(tmp / "state")}
        try:
            rc, out, err = run_cli(cli, argv, tmp, env)
        except subprocess.TimeoutExpired:
            return "timed out"
    evs = events_of(err)
    if exp["status"] == "completed":
        if rc != 0:
            return f"exit {rc}, expected completed: {err.strip()[-300:]}"
        try:
            got = json.loads(out)
        except ValueError:
            return f"stdout is not JSON: {out[:200]!r}"
        if "result" in exp and got != exp["result"]:
            return f"result {json.dumps(got)[:300]} != expected {json.dumps(exp['result'])[:300]}"
    else:
        if rc == 0:
            return f"exit 0, expected failed; stdout {out[:200]!r}"
        if "error_matches" in exp and not re.search(exp["error_matches"], err):
            return f"error does not match {exp['error_matches']!r}: {err.strip()[-300:]}"
    if "provider_calls" in exp:
        n = sum(1 for e in evs if e.get("type") == "agent.started")
        if n != exp["provider_calls"]:
            return f"provider_calls {n} != {exp['provider_calls']}"
    logs = [str((e.get("payload") or {}).get("message", "")) for e in evs if e.get("type") == "log"]
    if "log_messages" in exp and logs != exp["log_messages"]:
        return f"log messages {logs} != {exp['log_messages']}"
    for rx in exp.get("log_matches", []):
        if not any(re.search(rx, m) for m in logs):
            return f"no log message matches {rx!r}: {logs}"
    if "phase_started_titles" in exp:
        titles = [(e.get("payload") or {}).get("title") for e in evs if e.get("type") == "phase.started"]
        if titles != exp["phase_started_titles"]:
            return f"phase titles {titles} != {exp['phase_started_titles']}"
    return None

def _run_events(cli, argv, cwd, env):
    rc, out, err = run_cli(cli, argv, cwd, env)
    return rc, out, err, events_of(err)

def _check_step(name, exp, rc, out, evs):
    if exp["status"] == "completed" and rc != 0:
        return f"{name}: exit {rc}, expected completed"
    if exp["status"] == "completed" and "result" in exp:
        try:
            got = json.loads(out)
        except ValueError:
            return f"{name}: stdout is not JSON: {out[:120]!r}"
        if got != exp["result"]:
            return f"{name}: result {json.dumps(got)[:200]} != {json.dumps(exp['result'])[:200]}"
    n = sum(1 for e in evs if e.get("type") == "agent.started")
    if "provider_calls" in exp and n != exp["provider_calls"]:
        return f"{name}: provider_calls {n} != {exp['provider_calls']}"
    c = sum(1 for e in evs if e.get("type") == "agent.cached")
    if "cached_calls" in exp and c != exp["cached_calls"]:
        return f"{name}: cached_calls {c} != {exp['cached_calls']}"
    return None

def resume_case(cli, case_dir):
    case = json.loads((case_dir / "case.json").read_text())
    exp = case["expect"]
    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        env = {"HOME": str(tmp / "home"), "WORKFLOW_MCP_HOME": str(tmp / "state")}
        shutil.copy(case_dir / "v1.js", tmp / "v1.js")
        shutil.copy(case_dir / ("v2.js" if (case_dir / "v2.js").exists() else "v1.js"), tmp / "v2.js")
        (tmp / "fake1.json").write_text(json.dumps(case["fake1"]))
        (tmp / "fake2.json").write_text(json.dumps(case.get("fake2", case["fake1"])))
        base = ["--provider", "fake", "--events", "jsonl"]
        if "concurrency" in case.get("options", {}):
            base += ["--concurrency", str(case["options"]["concurrency"])]
        rc, out, err, evs = _run_events(cli, ["run", str(tmp / "v1.js"), *base, "--fake-script", str(tmp / "fake1.json")], tmp, env)
        why = _check_step("first run", exp["first"], rc, out, evs)
        if why:
            return why
        run_id = next((e.get("runId") for e in evs if e.get("runId")), None)
        if not run_id:
            return "first run: no runId in the events"
        for policy in ("content", "prefix"):
            if policy not in exp:
                continue
            rc, out, err, evs = _run_events(cli, ["run", str(tmp / "v2.js"), *base, "--fake-script", str(tmp / "fake2.json"),
                                                  "--resume-from", run_id, "--policy", policy], tmp, env)
            why = _check_step(f"resume ({policy})", exp[policy], rc, out, evs)
            if why:
                return why
    return None

def meta_cases(cli, meta_dir):
    doc = json.loads((meta_dir / "cases.json").read_text())
    fails = {}
    for name, exp in doc["cases"].items():
        rc, out, err = run_cli(cli, ["validate", str(meta_dir / name), "--json"], meta_dir)
        try:
            got = json.loads(out)
        except ValueError:
            fails[name] = f"validate --json printed no JSON (exit {rc}): {err.strip()[-200:]}"
            continue
        if bool(got.get("valid")) != exp["valid"] or (rc == 0) != exp["valid"]:
            fails[name] = f"valid={got.get('valid')} exit={rc}, expected valid={exp['valid']}"
        elif exp["valid"] and "meta" in exp and got.get("meta") != exp["meta"]:
            fails[name] = f"meta {got.get('meta')} != {exp['meta']}"
    # size boundary
    with tempfile.TemporaryDirectory() as tmp:
        head = "export const meta = { name: 'size', description: 'size limit' }\n"
        for size, valid in ((524288, True), (524289, False)):
            f = pathlib.Path(tmp) / f"size-{size}.js"
            f.write_text(head + "//" + "x" * (size - len(head) - 3) + "\n")
            assert f.stat().st_size == size
            rc, out, err = run_cli(cli, ["validate", str(f), "--json"], tmp)
            if (rc == 0) != valid:
                fails[f"size-{size}"] = f"exit {rc}, expected valid={valid}"
    return len(doc["cases"]) + 2, fails

def discovery_case(cli, disc_dir):
    case = json.loads((disc_dir / "case.json").read_text())
    with tempfile.TemporaryDirectory() as tmp:
        root = pathlib.Path(tmp)
        for rel, text in case["files"].items():
            f = root / rel
            f.parent.mkdir(parents=True, exist_ok=True)
            f.write_text(text)
        (root / case["git_root"] / ".git").mkdir(parents=True, exist_ok=True)
        cwd = root / case["cwd"]
        rc, out, err = run_cli(cli, ["list", str(cwd), "--json"], cwd, {"HOME": str(root / case["home"])})
        try:
            got = json.loads(out)
        except ValueError:
            return f"list --json printed no JSON (exit {rc}): {err.strip()[-200:]}"
        wfs = [{"name": w["name"], "source": w["source"],
                "path": os.path.relpath(os.path.realpath(w["path"]), os.path.realpath(root))}
               for w in got.get("workflows", [])]
        if wfs != case["expect"]["workflows"]:
            return f"workflows {wfs} != {case['expect']['workflows']}"
    return None

def main():
    cli, cases = sys.argv[1], pathlib.Path(sys.argv[2])
    only = sys.argv[sys.argv.index("--only") + 1] if "--only" in sys.argv else None
    kinds = set((sys.argv[sys.argv.index("--kinds") + 1] if "--kinds" in sys.argv else "runtime,resume,meta,discovery").split(","))
    passed, failed = 0, 0
    rt = cases / "runtime"
    if rt.is_dir() and "runtime" in kinds:
        for d in sorted(rt.iterdir()):
            if not (d / "case.json").exists() or (only and only not in d.name):
                continue
            why = runtime_case(cli, d)
            if why: failed += 1; print(f"FAIL runtime/{d.name}: {why}")
            else: passed += 1
    rs = cases / "resume"
    if rs.is_dir() and "resume" in kinds:
        for d in sorted(rs.iterdir()):
            if not (d / "case.json").exists() or (only and only not in d.name):
                continue
            why = resume_case(cli, d)
            if why: failed += 1; print(f"FAIL resume/{d.name}: {why}")
            else: passed += 1
    md = cases / "meta"
    if md.is_dir() and not only and "meta" in kinds:
        n, fails = meta_cases(cli, md)
        for k, v in fails.items(): print(f"FAIL meta/{k}: {v}")
        failed += len(fails); passed += n - len(fails)
    dd = cases / "discovery"
    if dd.is_dir() and not only and "discovery" in kinds:
        why = discovery_case(cli, dd)
        if why: failed += 1; print(f"FAIL discovery: {why}")
        else: passed += 1
    print(f"{passed} passed, {failed} failed")
    sys.exit(0 if failed == 0 else 1)

if __name__ == "__main__":
    main()
