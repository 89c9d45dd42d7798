"""What a validation run records, and the report made from it.

A Record holds, in memory, everything the report shows: `meta` (stamp, commit, budget, the GPU, ...), the
checks (one line each in the report's summary table: name, pass|fail|skip|info, detail), the sections'
markdown, and every command's seconds and exit status. The report is a function of the Record alone and is
rewritten (atomically) after every step, so a run killed at any point still leaves the report of what ran.
"""
import os
import time

RESULT_CELL = {"pass": "pass", "fail": "**FAIL**", "skip": "skipped", "info": "info"}
# Exit statuses of scripts/gpu-validate (docs/validation/README.md).
EXIT_PASSED, EXIT_FAILED, EXIT_NO_GPU, EXIT_OUT_OF_TIME = 0, 1, 3, 5
# The exit status recorded for a command that did not run for want of time, or was stopped for it.
NOT_RUN_FOR_TIME = "not run (time budget)"
TIMEOUT_STATUSES = ("124", "137")


def clean(text):
    return " ".join(str(text).replace("\t", " ").split("\n")).strip()


def cell(text):
    return clean(text).replace("|", "\\|")


def block(text):
    return "```\n" + text + ("" if text.endswith("\n") or not text else "\n") + "```\n"


def read_text(path):
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def write_atomically(path, text):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


class Record:
    def __init__(self, work, start=None):
        self.work = work
        self.start = time.time() if start is None else start
        self.meta = {}
        self.checks = []     # (check, result, detail)
        self.body = []       # markdown, in order
        self.timings = []    # (command name, seconds, exit status or why it did not run)
        self.sections = 0
        # During a CPU rehearsal or a dry run, the GPU steps' verdicts are recorded as skipped: nothing was
        # validated.
        self.rehearsal = False
        self.dry_run = False

    # ---- what the steps add ----
    def add(self, check, result, detail, ran=False):
        """One line of the summary. `ran`: the check ran even in a dry run or a rehearsal (dependency
        discovery), so its verdict stands."""
        if result in ("pass", "fail") and not ran:
            if self.dry_run:
                result, detail = "skip", "dry run: nothing ran: " + detail
            elif self.rehearsal:
                result, detail = "skip", "CPU rehearsal, not a validation: would be " + result + ": " + detail
        self.checks.append((check, result, clean(detail)))

    def say(self, text=""):
        """Markdown, as print() would write it (a line of its own)."""
        self.body.append(f"{text}\n")

    print = say  # checks.py reads like the report it prints

    def block(self, text):
        self.body.append(block(text))

    def section(self, title):
        self.sections += 1
        self.body.append(f"\n## {self.sections}. {title}\n\n")

    def timing(self, name):
        """(seconds, exit status) of the last command run as `name`; None when none was."""
        found = None
        for n, secs, rc in self.timings:
            if n == name:
                found = (secs, rc)
        return found

    def result_of(self, check):
        for c, result, detail in reversed(self.checks):
            if c == check:
                return result, detail
        return None

    # ---- the report ----
    def ran_out_of_time(self):
        if any(result == "skip" and detail.startswith("time budget") for _, result, detail in self.checks):
            return True
        return any(rc in TIMEOUT_STATUSES or rc == NOT_RUN_FOR_TIME for _, _, rc in self.timings)

    def decide(self, now=None):
        """(result line, exit status) of a finished or interrupted run."""
        elapsed = int((time.time() if now is None else now) - self.start)
        if self.meta.get("interrupted"):
            return f"INTERRUPTED by a signal after {elapsed} s: later steps did not run", EXIT_FAILED
        if self.dry_run:
            return "DRY RUN: no command was run; the steps below say what would have run", EXIT_PASSED
        if any(result == "fail" for _, result, _ in self.checks):
            return "SOME STEPS FAILED (see below)", EXIT_FAILED
        if self.meta.get("no_gpu_reason"):
            return (f"NOT VALIDATED: no usable GPU ({self.meta['no_gpu_reason']}); the build and the non-GPU steps "
                    "ran", EXIT_NO_GPU)
        if self.ran_out_of_time():
            return "INCOMPLETE: the time budget ran out before every step ran (nothing failed)", EXIT_OUT_OF_TIME
        return "every step passed", EXIT_PASSED

    def render(self, now=None, final=None):
        """The whole report. `final` is the result line of a finished run; None while it runs."""
        meta = self.meta
        elapsed = int((time.time() if now is None else now) - self.start)
        budget = meta.get("budget", "?")
        result = final or (f"IN PROGRESS: the run stopped here if this line remains ({elapsed} s into a "
                           f"{budget} s budget)")
        out = [f"# strata GPU validation, {meta.get('stamp', '?')}", ""]
        out.append(f"- commit: `{meta.get('commit', 'unknown')}` (from {meta.get('commit_from', '?')})")
        out.append(f"- machine: {meta.get('machine', '?')}, {meta.get('gpu_name') or 'GPU not identified'}")
        # README.md's and `strata devices`' status line quotes this line of the newest committed report
        # (cmake/ValidationStatus.cmake).
        out.append(f"- device: {meta.get('gpu_name') or 'no GPU identified'}")
        if meta.get("mode"):
            out.append(f"- mode: {meta['mode']}")
        out.append(f"- budget: {budget} s, used {elapsed} s; CUDA archs built: "
                   f"`{meta.get('archs') or 'not configured yet'}`")
        out.append(f"- artifacts: `{meta.get('artifacts', '?')}` ({meta.get('artifact_note', 'not written yet')}); "
                   f"work folder on the machine: `{meta.get('work', self.work)}`")
        out.append(f"- result: {result}")
        out += ["", "| check | result | detail |", "|---|---|---|"]
        for check, res, detail in self.checks:
            out.append(f"| {cell(check)} | {RESULT_CELL.get(res, 'info')} | {cell(detail)} |")
        text = "\n".join(out) + "\n" + "".join(self.body)
        if self.timings:
            text += "\n## Step timings\n\n| command | seconds | exit |\n|---|---:|---:|\n"
            text += "".join(f"| {cell(n)} | {s} | {cell(rc)} |\n" for n, s, rc in self.timings)
        return text

    def status_tsv(self):
        """The summary table as tab-separated lines, for the artifacts."""
        return "".join(f"{c}\t{r}\t{d}\n" for c, r, d in self.checks)
