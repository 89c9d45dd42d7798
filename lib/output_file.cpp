#include "lib/output_file.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <functional>

#include "lib/error.h"

namespace strata {
namespace {

// The temp path of the write in progress, for remove_pending_output(). A fixed buffer: a signal
// handler may read it, so it must not be a std::string that could be mid-reallocation.
char g_pending[4096];
std::atomic<bool> g_has_pending{false};
// Set by interrupt_output_writes() from the signal handler: a write waiting for a slow reader gives up.
std::atomic<bool> g_writes_interrupted{false};
static_assert(std::atomic<bool>::is_always_lock_free, "read and written from a signal handler");

std::string directory_of(const std::string& path) {
  size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

// Devices, FIFOs and the like (/dev/null, a pipe) are written in place: renaming a temporary file over
// them would replace the device node (as root) or fail, and atomicity means nothing for a stream. The
// stream aliases (/dev/stdout, /dev/fd/N, /proc/self/fd/N) count as such even when they lead to a regular
// file, and are appended to, so that `--json /dev/stdout > out.json` adds to the shell's file after the
// table instead of replacing or truncating it.
bool is_stream_alias(const std::string& path) {
  return path == "/dev/stdout" || path == "/dev/stderr" || path.rfind("/dev/fd/", 0) == 0 ||
         path.rfind("/proc/self/fd/", 0) == 0;
}

bool writes_in_place(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) return false;
  return !S_ISREG(st.st_mode) || is_stream_alias(path);
}

// Which non-regular files an output may name: a character device (/dev/null, /dev/full, a terminal) or
// a stream alias (whatever the shell connected it to). A named pipe is refused because open() blocks
// until some process opens it for reading, after the whole measurement, with the table already
// printed; a socket cannot be opened at all; a block device is a disk, never a report's place.
const char* unsupported_kind(const struct stat& st) {
  if (S_ISFIFO(st.st_mode)) return "a named pipe (FIFO): opening it would wait for a reader";
  if (S_ISSOCK(st.st_mode)) return "a socket";
  if (S_ISBLK(st.st_mode)) return "a block device";
  return nullptr;
}

// What an interrupted write leaves, for its message.
enum class Written { kNothing, kNotReplaced, kInPlace };

Error interrupted_while_writing(const std::string& path, Written written) {
  const char* what = written == Written::kNothing ? "stopped before writing '" : "stopped while writing '";
  const char* left = written == Written::kNothing       ? "'; no report written"
                     : written == Written::kNotReplaced ? "'; the file was not replaced"
                                                        : "' (written in place: what was written stays)";
  return Error(std::string("interrupted: ") + what + path + left, ExitCode::kInterrupted);
}

// The file the temporary is renamed over: the end of a symlink chain, so every link survives and the
// file it leads to is what gets written. A dangling link is followed the same way as a live one (its
// target is created), so that two outputs meeting through a link are caught by same_output_file()
// whether or not the file exists yet. Relative link text is read against the link's own directory.
// Throws UsageError for a chain that does not end (a loop).
std::string rename_target(const std::string& path) {
  std::string current = path;
  for (int hops = 0; hops < 40; ++hops) {  // the kernel's own limit (MAXSYMLINKS)
    struct stat st {};
    if (lstat(current.c_str(), &st) != 0 || !S_ISLNK(st.st_mode)) return current;
    std::string text(static_cast<size_t>(st.st_size > 0 ? st.st_size : 4095) + 1, '\0');
    const ssize_t n = readlink(current.c_str(), text.data(), text.size());
    if (n < 0 || static_cast<size_t>(n) >= text.size()) return current;  // changed under us: leave it to open()
    text.resize(static_cast<size_t>(n));
    current = text.front() == '/' ? text : directory_of(current) + "/" + text;
  }
  throw UsageError("cannot write '" + path + "': too many levels of symbolic links");
}

// mkstemp on "<target>.tmp.XXXXXX", remembered for remove_pending_output(); -1 with errno on failure.
int create_pending(std::string& tmp) {
  if (tmp.size() >= sizeof g_pending) {
    errno = ENAMETOOLONG;
    return -1;
  }
  int fd = mkstemp(tmp.data());
  if (fd < 0) return -1;
  std::memcpy(g_pending, tmp.c_str(), tmp.size() + 1);
  g_has_pending.store(true);
  return fd;
}

void drop_pending(const std::string& tmp) {
  unlink(tmp.c_str());
  g_has_pending.store(false);
}

}  // namespace

void check_output_path(const std::string& path) {
  if (path.empty()) throw UsageError("output path is empty");
  if (path.back() == '/') throw UsageError("output path '" + path + "' names a directory; give a file name");
  struct stat st {};
  if (stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    throw UsageError("output path '" + path + "' is a directory; give a file name inside it");
  }
  if (stat(path.c_str(), &st) == 0 && !is_stream_alias(path)) {
    if (const char* kind = unsupported_kind(st)) {
      throw UsageError("cannot write '" + path + "': it is " + kind +
                       "; give a regular file, a device such as /dev/null, or /dev/stdout");
    }
  }
  if (writes_in_place(path)) {
    if (access(path.c_str(), W_OK) != 0) {
      throw UsageError("cannot write '" + path + "': " + std::strerror(errno));
    }
    return;
  }
  const std::string target = rename_target(path);
  const std::string dir = directory_of(target);
  if (stat(dir.c_str(), &st) != 0) {
    throw UsageError("cannot write '" + path + "': directory '" + dir + "' does not exist");
  }
  if (!S_ISDIR(st.st_mode)) throw UsageError("cannot write '" + path + "': '" + dir + "' is not a directory");
  // Create (and remove) a temporary file exactly where write_file_atomically will. access(W_OK) is not
  // enough: it says yes to root for any directory, including a read-only file system or /proc.
  std::string probe = target + ".tmp.XXXXXX";
  const int fd = create_pending(probe);
  if (fd < 0) {
    throw UsageError("cannot write '" + path + "': cannot create a file in directory '" + dir + "' (" +
                     std::strerror(errno) + ")");
  }
  close(fd);
  drop_pending(probe);
  if (access(path.c_str(), F_OK) == 0 && access(path.c_str(), W_OK) != 0) {
    throw UsageError("cannot write '" + path + "': the file exists and is not writable");
  }
}

namespace {

// `fail` throws; it never returns. A descriptor opened with O_NONBLOCK (a device or stream written in
// place) waits for room in poll(), which a signal always interrupts (SA_RESTART or not), and gives up
// once interrupt_output_writes() has been called: a reader that stops reading cannot hang strata.
void write_all(int fd, const std::string& contents, const std::function<void(const char*)>& fail,
               const std::string& path, Written interrupted) {
  const char* p = contents.data();
  size_t left = contents.size();
  while (left > 0) {
    if (g_writes_interrupted.load()) throw interrupted_while_writing(path, interrupted);
    ssize_t n = write(fd, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        struct pollfd pfd {fd, POLLOUT, 0};
        // A bounded wait, so that a signal landing just before poll() is seen within 100 ms.
        if (poll(&pfd, 1, 100) < 0 && errno != EINTR) fail("poll");
        continue;
      }
      fail("write");
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
}

}  // namespace

void write_file_atomically(const std::string& path, const std::string& contents) {
  if (g_writes_interrupted.load()) throw interrupted_while_writing(path, Written::kNothing);
  if (writes_in_place(path)) {
    // O_NONBLOCK: open() must never wait (a FIFO that appeared since check_output_path fails with
    // ENXIO instead of blocking), and write_all() waits in an interruptible poll().
    int fd = open(path.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) throw Error("cannot write '" + path + "' (open): " + std::strerror(errno));
    struct stat st {};
    if (fstat(fd, &st) == 0 && !is_stream_alias(path) && unsupported_kind(st)) {
      close(fd);
      throw Error("cannot write '" + path + "': it is " + std::string(unsupported_kind(st)));
    }
    auto fail_in_place = [&](const char* step) {
      int err = errno;
      close(fd);
      throw Error("cannot write '" + path + "' (" + step + "): " + std::strerror(err));
    };
    try {
      write_all(fd, contents, fail_in_place, path, Written::kInPlace);
    } catch (const Error& e) {
      if (e.code() == ExitCode::kInterrupted) close(fd);
      throw;
    }
    if (close(fd) != 0) throw Error("cannot write '" + path + "' (close): " + std::strerror(errno));
    return;
  }
  const std::string target = rename_target(path);
  std::string tmp = target + ".tmp.XXXXXX";
  int fd = create_pending(tmp);
  if (fd < 0) throw Error("cannot create a temporary file next to '" + path + "': " + std::strerror(errno));
  auto fail = [&](const char* step) {
    int err = errno;
    close(fd);
    drop_pending(tmp);
    throw Error("cannot write '" + path + "' (" + step + "): " + std::strerror(err));
  };
  try {
    write_all(fd, contents, fail, path, Written::kNotReplaced);
  } catch (const Error& e) {
    if (e.code() == ExitCode::kInterrupted) {
      close(fd);
      drop_pending(tmp);
    }
    throw;
  }
  if (fsync(fd) != 0) fail("fsync");
  // mkstemp creates 0600 and rename() keeps the temporary's mode, so the mode is set here: a file being
  // replaced keeps its own permission bits (a 0600 report stays private), a new file gets the usual
  // 0666 minus the umask. Set-id and sticky bits are not carried over: a report is never executable.
  struct stat old {};
  mode_t mode = 0;
  if (stat(target.c_str(), &old) == 0 && S_ISREG(old.st_mode)) {
    mode = old.st_mode & 0777;
  } else {
    const mode_t mask = umask(0);
    umask(mask);
    mode = 0666 & ~mask;
  }
  if (fchmod(fd, mode) != 0) fail("fchmod");
  if (close(fd) != 0) {
    int err = errno;
    drop_pending(tmp);
    throw Error("cannot write '" + path + "' (close): " + std::strerror(err));
  }
  if (rename(tmp.c_str(), target.c_str()) != 0) {
    int err = errno;
    drop_pending(tmp);
    throw Error("cannot write '" + path + "' (rename): " + std::strerror(err));
  }
  g_has_pending.store(false);
}

bool same_output_file(const std::string& a, const std::string& b) {
  auto canonical = [](const std::string& path) {
    const std::string target = rename_target(path);
    const size_t slash = target.find_last_of('/');
    const std::string base = slash == std::string::npos ? target : target.substr(slash + 1);
    std::string dir = directory_of(target);
    if (char* real = realpath(dir.c_str(), nullptr)) {
      dir = real;
      std::free(real);
    }
    return dir + "/" + base;
  };
  return a == b || canonical(a) == canonical(b);
}

void remove_pending_output() noexcept {
  if (g_has_pending.load()) unlink(g_pending);
}

void interrupt_output_writes() noexcept { g_writes_interrupted.store(true); }

}  // namespace strata
