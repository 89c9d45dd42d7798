// Runs the real strata binary for the end-to-end tests (tests/apps): captures stdout, stderr and the
// exit status, optionally with a file-size limit (to simulate a full disk without mounting anything) and
// a working directory. fork + exec rather than popen, because popen merges nothing we need apart and
// cannot give us stderr, the exit status of a signalled child, or a resource limit.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

namespace strata::test {

struct RunResult {
  int exit_code = -1;   // -1 when the child was killed by a signal
  int term_signal = 0;  // the signal that killed it, 0 when it exited
  int64_t max_rss_kib = 0;  // the child's peak resident memory (wait4's ru_maxrss)
  std::string out;
  std::string err;
};

struct RunOptions {
  std::string cwd;               // "" = the test's working directory
  int64_t file_size_limit = -1;  // RLIMIT_FSIZE in bytes; -1 = unchanged (SIGXFSZ is ignored in the child)
  int64_t address_space_limit = -1;  // RLIMIT_AS in bytes (`ulimit -v`, which counts KiB); -1 = unchanged
  std::vector<std::string> env;  // extra NAME=value entries
};

// A running strata process. The constructor starts it; wait() collects everything.
class Subprocess {
 public:
  Subprocess(const std::vector<std::string>& args, const RunOptions& options = {});
  ~Subprocess();
  Subprocess(const Subprocess&) = delete;
  Subprocess& operator=(const Subprocess&) = delete;

  pid_t pid() const { return pid_; }
  // CPU time (user + system) the child has used so far, in clock ticks; -1 once it has exited. Lets a
  // test wait until the child is busy measuring without assuming anything about wall-clock speed.
  int64_t cpu_ticks() const;
  // Resident memory of the child now (VmRSS), in KiB; -1 once it has exited.
  int64_t rss_kib() const;
  // Reads both pipes to the end and reaps the child. `timeout_s` is a safety net against a hung child
  // (it is then killed and the result says so via term_signal == SIGKILL); it is never what a test checks.
  RunResult wait(int timeout_s = 120);

 private:
  pid_t pid_ = -1;
  int out_fd_ = -1;
  int err_fd_ = -1;
  bool reaped_ = false;
};

RunResult run_strata(const std::vector<std::string>& args, const RunOptions& options = {});

// A fresh empty directory under $TMPDIR (or /tmp), removed with everything in it at scope end.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }
  std::vector<std::string> entries() const;  // names in the directory, sorted

 private:
  std::string path_;
};

bool exists(const std::string& path);
std::string read_file(const std::string& path);
int count_lines(const std::string& text);
bool is_root();

}  // namespace strata::test
