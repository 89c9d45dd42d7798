"""The command line of scripts/gpu-validate: options, the work folder, the commit the report names, and the
end of a run (final report, artifacts, exit status) however it ends."""
import argparse
import os
import signal
import socket
import subprocess
import time

import steps
from record import Record, write_atomically
from runner import Runner


def parse(argv, root):
    p = argparse.ArgumentParser(prog="gpu-validate", description=(
        "Validates strata's GPU path on a machine with an NVIDIA GPU and writes a dated markdown report "
        "(docs/validation/README.md): one call of at most 10 minutes, no package registry, the build "
        "dependencies carried as .deb files (scripts/fetch-gpu-deps)."))
    p.add_argument("--out", default=os.environ.get("OUT") or os.path.join(root, "gpu-validate-out"),
                   help="receives the report and the artifacts tarball (default $OUT, else ./gpu-validate-out)")
    p.add_argument("--build", default=os.path.join(root, "build-gpu"), help="the build folder (default build-gpu)")
    p.add_argument("--work", help="the work folder (default <build>/validate-<stamp>)")
    p.add_argument("--deps", default=os.path.join(root, ".deps"), help="the .deb folder (default .deps)")
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 4, help="build jobs (default: the cores)")
    p.add_argument("--budget", type=int, default=int(os.environ.get("GPU_VALIDATE_BUDGET", "540")),
                   help="the whole run's deadline in seconds (default $GPU_VALIDATE_BUDGET, else 540)")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--rehearse-on-cpu", action="store_true",
                      help="without a GPU, run the trace, compare and sweep steps on the CPU (a rehearsal)")
    mode.add_argument("--dry-run", action="store_true",
                      help="run dependency discovery (unpacking nothing) and record every other command")
    args = p.parse_args(argv)
    if args.budget <= 0 or args.jobs <= 0:
        p.error("--budget and --jobs want positive whole numbers")
    return args


def commit(root):
    """(commit, where it came from): $STRATA_COMMIT, else .validate-commit's first line, else git."""
    if os.environ.get("STRATA_COMMIT"):
        return os.environ["STRATA_COMMIT"], "STRATA_COMMIT"
    path = os.path.join(root, ".validate-commit")
    if os.path.exists(path) and open(path).read().strip():
        return open(path).read().splitlines()[0].strip(), ".validate-commit"
    if os.path.exists(os.path.join(root, ".git")):
        try:
            sha = subprocess.run(["git", "-C", root, "rev-parse", "HEAD"], capture_output=True, text=True,
                                 timeout=10).stdout.strip()
            dirty = subprocess.run(["git", "-C", root, "diff", "--quiet", "HEAD"], timeout=30).returncode != 0
            if sha:
                return sha + (" (working tree has changes)" if dirty else ""), "git"
        except (OSError, subprocess.SubprocessError):
            pass
    return "unknown", "no STRATA_COMMIT, no .validate-commit, no git"


def setup(args, root):
    stamp = time.strftime("%Y-%m-%d-%H%M%SZ", time.gmtime())
    for d in (args.out, args.build):
        os.makedirs(d, exist_ok=True)
    out, build = os.path.realpath(args.out), os.path.realpath(args.build)
    work = os.path.realpath(args.work or os.path.join(build, f"validate-{stamp}"))
    for sub in ("logs", "json", "traces"):
        os.makedirs(os.path.join(work, sub), exist_ok=True)
    record = Record(work)
    record.dry_run = args.dry_run
    sha, source = commit(root)
    record.meta.update(stamp=stamp, budget=str(args.budget), commit=sha, commit_from=source, work=work,
                       machine=socket.gethostname(), artifacts=f"gpu-validate-{stamp}-artifacts.tar.gz")
    if args.dry_run:
        record.meta["mode"] = "dry run (--dry-run): commands recorded, not run"
    if args.rehearse_on_cpu:
        record.meta["mode"] = "CPU rehearsal (--rehearse-on-cpu) if no GPU is found: not a validation"
    runner = Runner(record, args.budget, os.path.join(out, f"gpu-validate-{stamp}.md"),
                    os.path.join(out, record.meta["artifacts"]), args.dry_run)
    state = steps.State(root=root, build=build, deps_dir=os.path.realpath(args.deps), jobs=args.jobs,
                        python=os.environ.get("PYTHON", "python3"), rehearse=args.rehearse_on_cpu)
    return runner, state


class Interrupted(Exception):
    pass


def on_signal(signum, frame):
    raise Interrupted(signal.Signals(signum).name)


def finish(runner):
    runner.write_report()
    runner.pack_artifacts()
    line, code = runner.record.decide()
    write_atomically(runner.report_path, runner.record.render(final=line))
    runner.log(f"report: {runner.report_path} ({line})")
    print(line)
    return code


def main(argv, root):
    args = parse(argv, root)
    runner, state = setup(args, root)
    runner.log(f"work folder {runner.record.work}, report {runner.report_path}, budget {args.budget} s")
    runner.write_report()
    # A SIGTERM (the device tool's limit) or Ctrl-C still ends with the report and the artifacts so far.
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        steps.run_all(runner, state)
    except Interrupted as e:
        runner.record.meta["interrupted"] = str(e)
    except Exception as e:  # a bug here must still leave the report of what ran, saying so
        runner.record.add("gpu-validate itself", "fail", f"{type(e).__name__}: {e}", ran=True)
    return finish(runner)
