#include "lib/output_file.h"

#include <fcntl.h>
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

// The file the temporary is renamed over: a symlink's regular-file target, so the link survives.
std::string rename_target(const std::string& path) {
  struct stat st {};
  if (lstat(path.c_str(), &st) == 0 && S_ISLNK(st.st_mode)) {
    if (char* real = realpath(path.c_str(), nullptr)) {
      std::string resolved = real;
      std::free(real);
      return resolved;
    }
  }
  return path;
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

// `fail` throws; it never returns.
void write_all(int fd, const std::string& contents, const std::function<void(const char*)>& fail) {
  const char* p = contents.data();
  size_t left = contents.size();
  while (left > 0) {
    ssize_t n = write(fd, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail("write");
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
}

}  // namespace

void write_file_atomically(const std::string& path, const std::string& contents) {
  if (writes_in_place(path)) {
    int fd = open(path.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
    if (fd < 0) throw Error("cannot write '" + path + "' (open): " + std::strerror(errno));
    write_all(fd, contents, [&](const char* step) {
      int err = errno;
      close(fd);
      throw Error("cannot write '" + path + "' (" + step + "): " + std::strerror(err));
    });
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
  write_all(fd, contents, fail);
  if (fsync(fd) != 0) fail("fsync");
  // mkstemp creates 0600; an output file should get the usual permissions (0666 minus the umask).
  mode_t mask = umask(0);
  umask(mask);
  fchmod(fd, 0666 & ~mask);
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

}  // namespace strata
