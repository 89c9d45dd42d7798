#!/usr/bin/env python3
"""scripts/gpu_validate: the runner's budget (runner.py), the Record's verdicts in dry runs and rehearsals
(record.py) and the parts of dependency discovery that need no GPU (deps.py)."""
import os
import time
import unittest

from gpu_validate_test_support import WorkFolder
import deps
from record import NOT_RUN_FOR_TIME
from runner import RESERVE_S, Runner


class Budget(unittest.TestCase):
    def setUp(self):
        self.work = WorkFolder()
        self.work.record.start = time.time()

    def tearDown(self):
        self.work.remove()

    def runner(self, budget_s, dry_run=False):
        return Runner(self.work.record, budget_s, os.path.join(self.work.path, "r.md"),
                      os.path.join(self.work.path, "a.tar.gz"), dry_run)

    def test_a_command_runs_with_its_output_logged_and_its_status_recorded(self):
        r = self.runner(600)
        self.assertEqual(r.run("hello", 30, ["sh", "-c", "echo hi; exit 3"]), 3)
        self.assertEqual(r.log_text("hello"), "hi\n")
        self.assertEqual(self.work.record.timing("hello")[1], "3")

    def test_a_command_past_its_limit_is_stopped_with_its_children(self):
        r = self.runner(600)
        marker = os.path.join(self.work.path, "child-alive")
        t0 = time.time()
        # The child outlives its shell unless the whole process group is stopped.
        rc = r.run("slow", 5, ["sh", "-c", f"(sleep 7; touch {marker}) & sleep 30"])
        self.assertEqual(rc, 124)
        self.assertLess(time.time() - t0, 12)
        self.assertIn("stopped after 5 s (time limit)", r.log_text("slow"))
        time.sleep(max(0.0, t0 + 8 - time.time()))
        self.assertFalse(os.path.exists(marker))

    def test_no_command_starts_without_time_for_it(self):
        r = self.runner(RESERVE_S + 3)
        self.assertEqual(r.run("late", 60, ["true"]), 125)
        self.assertEqual(self.work.record.timing("late")[1], NOT_RUN_FOR_TIME)
        self.assertFalse(r.have_time(10))
        r.budget_skip("late step")
        result, detail = self.work.record.result_of("late step")
        self.assertEqual(result, "skip")
        self.assertRegex(detail, r"^time budget: \d+ s left of 23 s$")
        self.assertEqual(self.work.record.decide()[1], 5)

    def test_a_dry_run_records_the_command(self):
        self.work.record.dry_run = True
        r = self.runner(600, dry_run=True)
        self.assertEqual(r.run("x", 30, ["false", "a b"]), 0)
        self.assertEqual(self.work.record.timing("x")[1], "dry run: false 'a b'")
        self.assertEqual(r.run("y", 30, ["sh", "-c", "exit 4"], in_dry_run=True), 4)


class Verdicts(unittest.TestCase):
    def test_dry_runs_and_rehearsals_validate_nothing_but_discovery_stands(self):
        work = WorkFolder()
        try:
            rec = work.record
            rec.rehearsal = True
            rec.add("traces exit 0", "pass", "5 traces")
            rec.add("toolchain and CUDA libraries", "fail", "no nvcc", ran=True)
            rec.add("host tests", "info", "stated")
            self.assertEqual(work.statuses(), {
                "traces exit 0": ("skip", "CPU rehearsal, not a validation: would be pass: 5 traces"),
                "toolchain and CUDA libraries": ("fail", "no nvcc"),
                "host tests": ("info", "stated")})
            rec.rehearsal, rec.dry_run = False, True
            rec.add("build", "fail", "did not build")
            self.assertEqual(rec.result_of("build"), ("skip", "dry run: nothing ran: did not build"))
        finally:
            work.remove()


class Commit(unittest.TestCase):
    def test_the_commit_comes_from_the_environment_then_the_carried_file(self):
        import main
        work = WorkFolder()
        saved = os.environ.pop("STRATA_COMMIT", None)
        try:
            self.assertEqual(main.commit(work.path), ("unknown", "no STRATA_COMMIT, no .validate-commit, no git"))
            work.write(".validate-commit", "0123abcd\n")
            self.assertEqual(main.commit(work.path), ("0123abcd", ".validate-commit"))
            os.environ["STRATA_COMMIT"] = "feedbeef"
            self.assertEqual(main.commit(work.path), ("feedbeef", "STRATA_COMMIT"))
        finally:
            os.environ.pop("STRATA_COMMIT", None)
            if saved is not None:
                os.environ["STRATA_COMMIT"] = saved
            work.remove()


class Dependencies(unittest.TestCase):
    def setUp(self):
        self.work = WorkFolder()
        self.debs = os.path.join(self.work.path, "debs")
        os.makedirs(self.debs)

    def tearDown(self):
        self.work.remove()

    def test_no_carried_packages_is_a_skip(self):
        d = deps.Deps()
        deps.carried_packages(self.work.record, self.work.path, self.debs, False, d)
        self.assertEqual(self.work.statuses()["carried Debian packages"][0], "skip")
        self.assertEqual(d.cmake_args, [])

    def test_two_versions_of_one_package_are_refused(self):
        for name in ("libfmt-dev_9.1.0_amd64.deb", "libfmt-dev_9.2.0_amd64.deb"):
            open(os.path.join(self.debs, name), "w").close()
        d = deps.Deps()
        deps.carried_packages(self.work.record, self.work.path, self.debs, True, d)
        self.assertEqual(self.work.statuses()["carried Debian packages"],
                         ("fail", "two versions of: libfmt-dev in .deps (rerun scripts/fetch-gpu-deps)"))
        self.assertFalse(d.ok)
        self.assertIn(f"-DCMAKE_PREFIX_PATH={self.work.path}/deps-prefix/usr", d.cmake_args)

    def test_libraries_are_found_with_their_headers_and_in_order(self):
        for root in ("a", "b"):
            os.makedirs(os.path.join(self.work.path, root, "lib"))
            os.makedirs(os.path.join(self.work.path, root, "include"))
            open(os.path.join(self.work.path, root, "lib", "libcudnn.so.9"), "w").close()
        open(os.path.join(self.work.path, "b", "include", "cudnn.h"), "w").close()
        roots = [(label, os.path.join(self.work.path, label, "include"), os.path.join(self.work.path, label, "lib"))
                 for label in ("a", "b")]
        log = []
        found = deps.find_libraries(roots, log)
        self.assertEqual(found["cudnn"][2], "b")  # the first copy whose headers are there too
        self.assertNotIn("cublas", found)
        self.assertIn("    (none with headers)", log)

    def test_compilers_name_both_versions(self):
        text = deps.compilers(deps.Deps(cxx="/nonexistent/g++", cuda_root="/nonexistent"))
        self.assertEqual(text, "C++ compiler did not answer; nvcc not found")
        self.assertTrue(deps.version_at_least("3.25.1", (3, 25)))
        self.assertFalse(deps.version_at_least("3.24.9", (3, 25)))


if __name__ == "__main__":
    unittest.main()
