"""Commands under one time budget, recorded for the report.

Every command runs with its output in WORK/logs/NAME.log, in its own process group under a limit of at
most what is left of the budget (less RESERVE_S, kept for the final report and the tarball); a command
that no longer fits (under 5 s) is not started and is recorded as "not run (time budget)". In a dry run
commands are recorded, not run.
"""
import os
import shlex
import signal
import subprocess
import sys
import tarfile
import time

from record import NOT_RUN_FOR_TIME, write_atomically

RESERVE_S = 20                      # seconds kept back for the final report and the artifacts tarball
ARTIFACTS_MAX_BYTES = 15 * 2 ** 20  # what comes back from the device machine is capped at 16 MiB per file


class Runner:
    def __init__(self, record, budget_s, report_path, artifacts_path, dry_run):
        self.record = record
        self.budget_s = budget_s
        self.deadline = record.start + budget_s
        self.report_path = report_path
        self.artifacts_path = artifacts_path
        self.dry_run = dry_run
        self.env = dict(os.environ)

    def log(self, text):
        print(f"gpu-validate [{int(time.time() - self.record.start)}s]: {text}", file=sys.stderr, flush=True)

    def remaining(self):
        return int(self.deadline - time.time())

    def have_time(self, need_s):
        """Whether at least `need_s` seconds are left for a step, beyond the reserve."""
        return self.remaining() - RESERVE_S >= need_s

    def write_report(self):
        write_atomically(self.report_path, self.record.render())

    def verdict(self, result, check, detail):
        self.record.add(check, result, detail)
        check, result, detail = self.record.checks[-1]
        self.log(f"{result.upper()} {check}: {detail}")
        self.write_report()

    def budget_skip(self, check):
        """A step that did not run for want of time."""
        left = self.remaining()
        self.record.say(f"Skipped for want of time ({left} s of the {self.budget_s} s budget left).")
        self.verdict("skip", check, f"time budget: {left} s left of {self.budget_s} s")

    def section(self, title):
        self.record.section(title)
        self.log(f"== {self.record.sections}. {title}")
        self.write_report()

    def log_path(self, name):
        return os.path.join(self.record.work, "logs", name + ".log")

    def log_text(self, name):
        try:
            with open(self.log_path(name), errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def run(self, name, cap_s, cmd, in_dry_run=False, env=None):
        """`cmd` (a list) with stdout and stderr in logs/NAME.log under min(cap_s, what is left); its exit
        status, 124 when it was stopped for time, 125 when too little time was left to start it. A dry run
        records the command and returns 0, unless `in_dry_run`."""
        text = " ".join(shlex.quote(str(c)) for c in cmd)
        if self.dry_run and not in_dry_run:
            with open(self.log_path(name), "w") as f:
                f.write(f"dry run: {text}\n")
            self.record.timings.append((name, 0, f"dry run: {text}"))
            return 0
        limit = min(cap_s, self.remaining() - RESERVE_S)
        if limit < 5:
            with open(self.log_path(name), "w") as f:
                f.write("not run: time budget\n")
            self.record.timings.append((name, 0, NOT_RUN_FOR_TIME))
            return 125
        self.log(f"running ({limit} s max): {text}")
        t0 = time.time()
        with open(self.log_path(name), "w") as out:
            try:
                proc = subprocess.Popen([str(c) for c in cmd], stdout=out, stderr=subprocess.STDOUT,
                                        env=env or self.env, start_new_session=True)
            except OSError as e:
                out.write(f"gpu-validate: could not start: {e}\n")
                self.record.timings.append((name, 0, "127"))
                return 127
            try:
                rc = wait_or_kill(proc, limit)
            except BaseException:  # interrupted (SIGTERM, Ctrl-C): the command must not outlive the run
                kill_group(proc)
                raise
            if rc == 124:
                out.write(f"gpu-validate: stopped after {limit} s (time limit)\n")
        self.record.timings.append((name, int(time.time() - t0), str(rc)))
        return rc

    def pack_artifacts(self):
        """logs/, json/, traces/ and the summary as a tarball under 15 MiB: without the traces if too big."""
        if time.time() - self.record.start > self.budget_s + 30:
            self.record.meta["artifact_note"] = "not written: past the time budget"
            return
        work = self.record.work
        write_atomically(os.path.join(work, "status.tsv"), self.record.status_tsv())
        tmp = self.artifacts_path + ".tmp"
        for folders, note in ((("logs", "json", "traces"), "logs/, json/, traces/"),
                              (("logs", "json"), "Chrome traces left out (over 15 MiB with them)")):
            with tarfile.open(tmp, "w:gz") as t:
                for item in folders + ("status.tsv",):
                    if os.path.exists(os.path.join(work, item)):
                        t.add(os.path.join(work, item), arcname=item)
            size = os.path.getsize(tmp)
            if size <= ARTIFACTS_MAX_BYTES:
                os.replace(tmp, self.artifacts_path)
                self.record.meta["artifact_note"] = f"{size // 1024} KiB: {note}"
                return
        os.remove(tmp)
        self.record.meta["artifact_note"] = "not written (over 15 MiB even without the traces)"


def wait_or_kill(proc, limit_s):
    """The exit status of `proc`, or 124 after terminating its whole process group past `limit_s` (the
    group: a build's compilers, a test's children)."""
    try:
        return proc.wait(timeout=limit_s)
    except subprocess.TimeoutExpired:
        pass
    kill_group(proc)
    return 124


def kill_group(proc):
    """SIGTERM to the command's process group, SIGKILL 5 s later if it is still there."""
    for sig, grace in ((signal.SIGTERM, 5), (signal.SIGKILL, 5)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        try:
            proc.wait(timeout=grace)
            break
        except subprocess.TimeoutExpired:
            continue
