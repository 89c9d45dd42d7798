// Atomic output files (lib/output_file.h). The tests may run as root, where permission bits do not stop
// anything; cases that depend on them say so and are skipped for root, and the root-proof cases (/proc,
// a file where a directory should be, a file-size limit) stand in for them.
#include "lib/output_file.h"

#include <doctest/doctest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>

#include "lib/error.h"
#include "tests/support/subprocess.h"

using namespace strata;
using strata::test::TempDir;

namespace {

std::string usage_message(const std::string& path) {
  try {
    check_output_path(path);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "<accepted>";
}

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

}  // namespace

TEST_CASE("write_file_atomically writes the contents and leaves no temporary file") {
  TempDir dir;
  const std::string path = dir.file("out.json");
  CHECK_NOTHROW(check_output_path(path));
  CHECK(dir.entries().empty());  // the writability probe removed its file
  write_file_atomically(path, "{\"a\": 1}\n");
  CHECK(test::read_file(path) == "{\"a\": 1}\n");
  CHECK(dir.entries() == std::vector<std::string>{"out.json"});
  // A second write replaces the whole file, never appends or leaves a mix.
  write_file_atomically(path, "2");
  CHECK(test::read_file(path) == "2");
  CHECK(dir.entries() == std::vector<std::string>{"out.json"});
}

TEST_CASE("output files get 0666 minus the umask, not mkstemp's 0600") {
  TempDir dir;
  const mode_t old = umask(022);
  write_file_atomically(dir.file("a"), "x");
  umask(old);
  struct stat st {};
  REQUIRE(stat(dir.file("a").c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0644);
}

TEST_CASE("check_output_path refuses paths that cannot be written, naming the reason") {
  TempDir dir;
  CHECK(contains(usage_message(""), "output path is empty"));
  CHECK(contains(usage_message(dir.path() + "/"), "names a directory"));
  CHECK(contains(usage_message(dir.path()), "is a directory"));
  CHECK(contains(usage_message(dir.file("missing/out.json")),
                 "directory '" + dir.file("missing") + "' does not exist"));
  write_file_atomically(dir.file("plain"), "x");
  CHECK(contains(usage_message(dir.file("plain/out.json")), "is not a directory"));
  // /proc refuses new files even to root; access(W_OK) alone would have said yes to root.
  CHECK(contains(usage_message("/proc/strata-test-out.json"), "cannot create a file in directory '/proc'"));
  // Nothing the checks did is left behind.
  CHECK(dir.entries() == std::vector<std::string>{"plain"});
}

TEST_CASE("check_output_path refuses a directory without write permission (not meaningful as root)") {
  if (test::is_root()) {
    MESSAGE("skipped: running as root, which may write into a 0555 directory; /proc covers the refusal");
    return;
  }
  TempDir dir;
  const std::string ro = dir.file("ro");
  REQUIRE(mkdir(ro.c_str(), 0555) == 0);
  CHECK(contains(usage_message(ro + "/out.json"), "Permission denied"));
}

TEST_CASE("a device is written in place and never replaced by a regular file") {
  CHECK_NOTHROW(check_output_path("/dev/null"));
  CHECK_NOTHROW(write_file_atomically("/dev/null", "discarded\n"));
  struct stat st {};
  REQUIRE(stat("/dev/null", &st) == 0);
  CHECK(S_ISCHR(st.st_mode));
  // /dev/full: every write fails with ENOSPC, which is what a full disk looks like.
  try {
    write_file_atomically("/dev/full", std::string(4096, 'x'));
    FAIL("writing to /dev/full succeeded");
  } catch (const Error& e) {
    CHECK(contains(e.what(), "No space left on device"));
    CHECK(e.code() == ExitCode::kFailure);
  }
  REQUIRE(stat("/dev/full", &st) == 0);
  CHECK(S_ISCHR(st.st_mode));
}

TEST_CASE("a symlink to a regular file is followed: the target is replaced, the link kept") {
  TempDir dir;
  write_file_atomically(dir.file("real.json"), "old");
  REQUIRE(symlink("real.json", dir.file("link.json").c_str()) == 0);
  write_file_atomically(dir.file("link.json"), "new");
  struct stat st {};
  REQUIRE(lstat(dir.file("link.json").c_str(), &st) == 0);
  CHECK(S_ISLNK(st.st_mode));
  CHECK(test::read_file(dir.file("real.json")) == "new");
  CHECK(dir.entries() == std::vector<std::string>{"link.json", "real.json"});
}

TEST_CASE("a write that fails part-way (a full disk) leaves neither the file nor a temporary") {
  TempDir dir;
  write_file_atomically(dir.file("keep.json"), "previous contents");
  // RLIMIT_FSIZE makes write() fail with EFBIG past 1 KiB, like a file system that fills up mid-write.
  struct rlimit saved {};
  REQUIRE(getrlimit(RLIMIT_FSIZE, &saved) == 0);
  auto* old_handler = signal(SIGXFSZ, SIG_IGN);
  struct rlimit small = saved;
  small.rlim_cur = 1024;
  REQUIRE(setrlimit(RLIMIT_FSIZE, &small) == 0);
  std::string message;
  try {
    write_file_atomically(dir.file("new.json"), std::string(64 * 1024, 'x'));
  } catch (const Error& e) {
    message = e.what();
  }
  try {
    write_file_atomically(dir.file("keep.json"), std::string(64 * 1024, 'y'));
  } catch (const Error&) {
  }
  setrlimit(RLIMIT_FSIZE, &saved);
  signal(SIGXFSZ, old_handler);
  CHECK(contains(message, "cannot write '" + dir.file("new.json") + "' (write): File too large"));
  CHECK(dir.entries() == std::vector<std::string>{"keep.json"});
  // The failed replacement left the previous file untouched.
  CHECK(test::read_file(dir.file("keep.json")) == "previous contents");
}

TEST_CASE("remove_pending_output without a write in progress does nothing") {
  TempDir dir;
  write_file_atomically(dir.file("a"), "x");
  remove_pending_output();
  CHECK(dir.entries() == std::vector<std::string>{"a"});
}

TEST_CASE("a named pipe, however reached, is refused before anything opens it") {
  TempDir dir;
  REQUIRE(mkfifo(dir.file("ff").c_str(), 0600) == 0);
  REQUIRE(symlink("ff", dir.file("to_ff").c_str()) == 0);
  CHECK(contains(usage_message(dir.file("ff")), "is a named pipe (FIFO)"));
  CHECK(contains(usage_message(dir.file("to_ff")), "is a named pipe (FIFO)"));
}

TEST_CASE("a replaced file keeps its permission bits - a new one gets 0666 minus the umask") {
  TempDir dir;
  write_file_atomically(dir.file("private.json"), "old");
  REQUIRE(chmod(dir.file("private.json").c_str(), 0600) == 0);
  write_file_atomically(dir.file("private.json"), "new");
  struct stat st {};
  REQUIRE(stat(dir.file("private.json").c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0600);
  const mode_t mask = umask(0022);
  write_file_atomically(dir.file("fresh.json"), "x");
  umask(mask);
  REQUIRE(stat(dir.file("fresh.json").c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0644);
}

TEST_CASE("a dangling symlink leads where a live one does: same_output_file sees through both") {
  TempDir dir;
  REQUIRE(symlink("x.json", dir.file("y.json").c_str()) == 0);
  CHECK(same_output_file(dir.file("x.json"), dir.file("y.json")));
  REQUIRE(symlink("y.json", dir.file("z.json").c_str()) == 0);  // a chain
  CHECK(same_output_file(dir.file("x.json"), dir.file("z.json")));
  CHECK_FALSE(same_output_file(dir.file("x.json"), dir.file("w.json")));
  write_file_atomically(dir.file("z.json"), "through two links");
  CHECK(test::read_file(dir.file("x.json")) == "through two links");
  CHECK(dir.entries() == std::vector<std::string>{"x.json", "y.json", "z.json"});
  CHECK(same_output_file(dir.file("x.json"), dir.file("y.json")));  // and once it exists
}
