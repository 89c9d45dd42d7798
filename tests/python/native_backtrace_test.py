"""tests/python: STRATA_NATIVE_BACKTRACE (Note [A native backtrace on a crash] in
apps/python/native_backtrace.cpp). A child process imports strata and dies of SIGSEGV (ctypes reads
address 0); the handler must list the native frames and then hand the signal on, so that the process still
dies of it and Python's faulthandler still reports. Off, nothing of ours runs."""
import os
import re
import shutil
import signal
import subprocess
import sys
import unittest

CRASH = "import ctypes, strata; print(strata._strata._native_backtrace, flush=True); ctypes.string_at(0)"


def run_child(env_value):
    env = dict(os.environ)
    env.pop("STRATA_NATIVE_BACKTRACE", None)
    if env_value is not None:
        env["STRATA_NATIVE_BACKTRACE"] = env_value
    return subprocess.run([sys.executable, "-X", "faulthandler", "-c", CRASH], env=env, capture_output=True,
                          text=True, timeout=120)


class NativeBacktraceTest(unittest.TestCase):
    def test_a_crash_lists_native_frames_then_dies_of_its_signal(self):
        r = run_child("1")
        self.assertEqual(r.stdout.strip(), "True")
        self.assertEqual(r.returncode, -signal.SIGSEGV, r.stderr)
        lines = r.stderr.splitlines()
        begin = next(i for i, l in enumerate(lines) if l.startswith("strata: fatal signal 11 (SIGSEGV)"))
        # The address the fault touched: ctypes read address 0.
        self.assertRegex(lines[begin], r"^strata: fatal signal 11 \(SIGSEGV\) at fault address 0x0; ")
        end = lines.index("strata: end of native backtrace")
        frames = lines[begin + 1:end]
        self.assertGreaterEqual(len(frames), 3, r.stderr)
        # The handler's own frame is the first: in the extension, as library(+offset)[address].
        self.assertRegex(frames[0], r"/_strata\.[^/]*\.so\(\+0x[0-9a-f]+\)\[0x[0-9a-f]+\]$")
        # The offset resolves to the handler with addr2line: the extension keeps its symbol table (a
        # stripped module would give "??", and the validation's resolved frames would say nothing).
        found = re.search(r"^(/\S+)\(\+(0x[0-9a-f]+)\)", frames[0])
        if shutil.which("addr2line"):
            resolved = subprocess.run(["addr2line", "-f", "-C", "-e", found.group(1), found.group(2)],
                                      capture_output=True, text=True, timeout=60).stdout
            self.assertIn("on_fatal_signal", resolved)
        # Then faulthandler, the handler that was there before, reports as it always does.
        self.assertIn("Fatal Python error: Segmentation fault", "\n".join(lines[end:]))

    def test_off_by_default_and_with_zero(self):
        for value in (None, "0", ""):
            r = run_child(value)
            self.assertEqual(r.stdout.strip(), "False", value)
            self.assertEqual(r.returncode, -signal.SIGSEGV)
            self.assertNotIn("strata: fatal signal", r.stderr)
            self.assertIn("Fatal Python error: Segmentation fault", r.stderr)


if __name__ == "__main__":
    unittest.main()
