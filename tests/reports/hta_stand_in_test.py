#!/usr/bin/python3
"""A stand-in for Holistic Trace Analysis (HTA), which is not installed here (nor pandas).

Runs the real strata binary on the CPU (`strata trace matmul 64`, `strata compare matmul 64`), and reads
the Chrome traces it writes the way HTA's parser does (hta/common/trace_file.py, trace_parser.py and
trace.py, read for this test; no HTA code is copied): every step below names the HTA function whose
requirement it mirrors. It checks what HTA needs, not HTA's results; docs/traces.md says what a real
HTA run gives. Usage: hta_stand_in_test.py STRATA_BINARY
"""

import json
import os
import re
import subprocess
import sys
import tempfile

STEP_NAME = re.compile(r"ProfilerStep\s*#\s*(\d+)")  # HTA's add_iteration() reads N with this pattern
failures = []


def check(condition, message):
    if not condition:
        failures.append(message)


def run(strata, args, path):
    r = subprocess.run([strata] + args + ["--device", "cpu", "--chrome-trace", path], capture_output=True,
                       text=True)
    if r.returncode != 0:
        sys.exit(f"strata {' '.join(args)} failed ({r.returncode}):\n{r.stdout}\n{r.stderr}")


def is_flat(value):
    return not isinstance(value, (dict, list))


def read_like_hta(path, label):
    """Returns (metadata, events kept as HTA keeps them) after the checks HTA's reading makes."""
    # trace_file.create_rank_to_trace_dict: the file name ends in .json, the document has
    # distributedInfo.rank, an int >= 0 (HTA raises ValueError without it).
    check(path.endswith(".json"), f"{label}: HTA reads only .json / .gz files")
    with open(path) as fh:
        text = fh.read()
    pairs = json.loads(text, object_pairs_hook=lambda p: p)  # keeps the order of the keys
    keys = [k for k, _ in pairs]
    doc = json.loads(text)
    info = doc.get("distributedInfo")
    check(isinstance(info, dict) and "rank" in info, f"{label}: no distributedInfo.rank")
    if isinstance(info, dict):
        rank = info.get("rank")
        check(isinstance(rank, int) and not isinstance(rank, bool) and rank >= 0,
              f"{label}: rank {rank!r} is not an int >= 0")

    # trace_parser.parse_metadata_ijson: reads the top-level keys until "traceEvents", following one
    # level of nesting: scalars, flat objects, arrays of flat objects (an empty array trips its assert).
    check("traceEvents" in keys, f"{label}: no traceEvents")
    meta = {}
    for key, _ in pairs:
        if key == "traceEvents":
            break
        meta[key] = doc[key]
    for key in ("schemaVersion", "distributedInfo", "displayTimeUnit", "baseTimeNanoseconds"):
        check(key in meta, f"{label}: {key} is not in the header before traceEvents")
    for key, value in meta.items():
        if isinstance(value, dict):
            check(all(is_flat(v) for v in value.values()), f"{label}: {key} nests deeper than HTA reads")
        elif isinstance(value, list):
            check(len(value) > 0, f"{label}: {key} is an empty array (HTA's metadata reader asserts)")
            check(all(isinstance(v, dict) and all(is_flat(x) for x in v.values()) for v in value),
                  f"{label}: {key} is not an array of flat objects")
    # trace.trace_event_timestamp_to_unixtime_ns: ts (us) + baseTimeNanoseconds = Unix time.
    base = meta.get("baseTimeNanoseconds")
    check(isinstance(base, int) and 1.5e18 < base < 4e18,
          f"{label}: baseTimeNanoseconds {base!r} is not on the Unix epoch (HTA adds it to ts for wall time)")

    # trace_parser._compress_df: events without dur or cat are dropped (metadata and flow events), and
    # cat "Trace" too; every kept event needs a name (the symbol table is built from name and cat).
    events = doc["traceEvents"]
    kept = [e for e in events if e.get("dur") is not None and e.get("cat") is not None and e["cat"] != "Trace"]
    check(len(kept) > 0, f"{label}: no event would survive HTA's parser")
    for e in kept:
        check(isinstance(e.get("name"), str), f"{label}: event without a name: {e}")
        check(isinstance(e.get("ts"), (int, float)) and isinstance(e["dur"], (int, float)),
              f"{label}: ts/dur not numbers: {e}")
        # The args HTA turns into columns, with its defaults (event_args yaml): -1 for stream and
        # correlation. A host event must not have a stream: HTA splits host from GPU on stream.
        args = e.get("args", {})
        e["_stream"] = args.get("stream", -1)
        e["_correlation"] = args.get("correlation", -1)
        e["_external"] = args.get("External id", -1)
        for name in ("stream", "correlation", "External id", "cbid", "device"):
            if name in args:
                check(isinstance(args[name], int), f"{label}: args.{name} is not an int: {e}")
    return meta, kept


def check_iterations(kept, label, expect_steps):
    """trace.add_iteration: host events (stream < 0) take the N of the ProfilerStep#N whose [ts, ts + dur)
    holds their ts; GPU events (stream > 0) take their launch's, joined on correlation."""
    steps = []
    for e in kept:
        if e["name"].startswith("ProfilerStep"):
            m = STEP_NAME.match(e["name"])
            check(m is not None, f"{label}: {e['name']} does not parse as ProfilerStep#N (HTA asserts)")
            if m:
                steps.append((e["ts"], e["ts"] + e["dur"], int(m.group(1)), e))
    check(len(steps) == expect_steps, f"{label}: {len(steps)} ProfilerStep spans, expected {expect_steps}")
    numbers = [n for _, _, n, _ in steps]
    check(len(set(numbers)) == len(numbers), f"{label}: step numbers repeat: {numbers}")

    def iteration(ts):
        found = -1
        for begin, end, n, _ in steps:
            if begin <= ts < end:
                found = n
        return found

    host = [e for e in kept if e["_stream"] < 0 and not e["name"].startswith("ProfilerStep")]
    for _, _, n, step in steps:
        # The step sits on the host thread of its calls, and holds every span of its calls.
        first, last = step["args"]["first op"], step["args"]["last op"]
        check(n == first, f"{label}: ProfilerStep#{n} is not numbered by its first op ({first})")
        mine = [e for e in host if first <= e["_external"] <= last and e["pid"] == step["pid"]]
        check(len(mine) > 0, f"{label}: ProfilerStep#{n} holds no span of ops {first}..{last}")
        for e in mine:
            check(e["tid"] == step["tid"], f"{label}: {e['name']} of op {e['_external']} is off the step's thread")
            check(iteration(e["ts"]) == n and e["ts"] + e["dur"] <= step["ts"] + step["dur"] + 1e-9,
                  f"{label}: {e['name']} of op {e['_external']} at {e['ts']} is not inside ProfilerStep#{n}")
    gpu = [e for e in kept if e["_stream"] > 0]
    check(not gpu, f"{label}: a CPU run wrote GPU events")  # HTA's GPU analyses need a GPU run
    return steps


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    strata = sys.argv[1]
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "t.json")
        run(strata, ["trace", "matmul", "64", "--repeat", "5", "--warmup", "1"], path)
        meta, kept = read_like_hta(path, "trace")
        check("deviceProperties" not in meta, "trace: a CPU run wrote deviceProperties")
        steps = check_iterations(kept, "trace", expect_steps=5)
        # The cold call (op 1) is reported apart and is no step: HTA gives it iteration -1.
        check(all(n != 1 for _, _, n, _ in steps), "trace: the cold call got a ProfilerStep")

        path = os.path.join(tmp, "c.json")
        run(strata, ["compare", "matmul", "64", "--repeat", "3", "--warmup", "1", "--ops-per-graph", "2"], path)
        _, kept = read_like_hta(path, "compare")
        steps = check_iterations(kept, "compare", expect_steps=6)  # 3 eager rounds, 3 replay rounds
        check(len({s["pid"] for _, _, _, s in steps}) == 2, "compare: the steps are not in both process groups")
    for f in failures:
        print("FAIL:", f)
    if failures:
        sys.exit(1)
    print("ok: strata's CPU traces carry what HTA's parser reads (stand-in for HTA, see docs/traces.md)")


if __name__ == "__main__":
    main()
