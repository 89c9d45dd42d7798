#include "lib/output_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

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

}  // namespace

void check_output_path(const std::string& path) {
  if (path.empty()) throw UsageError("output path is empty");
  if (path.back() == '/') throw UsageError("output path '" + path + "' names a directory; give a file name");
  struct stat st {};
  if (stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    throw UsageError("output path '" + path + "' is a directory; give a file name inside it");
  }
  const std::string dir = directory_of(path);
  if (stat(dir.c_str(), &st) != 0) {
    throw UsageError("cannot write '" + path + "': directory '" + dir + "' does not exist");
  }
  if (!S_ISDIR(st.st_mode)) throw UsageError("cannot write '" + path + "': '" + dir + "' is not a directory");
  if (access(dir.c_str(), W_OK | X_OK) != 0) {
    throw UsageError("cannot write '" + path + "': directory '" + dir + "' is not writable (" +
                     std::strerror(errno) + ")");
  }
  if (access(path.c_str(), F_OK) == 0 && access(path.c_str(), W_OK) != 0) {
    throw UsageError("cannot write '" + path + "': the file exists and is not writable");
  }
}

void write_file_atomically(const std::string& path, const std::string& contents) {
  std::string tmp = path + ".tmp.XXXXXX";
  if (tmp.size() >= sizeof g_pending) throw Error("output path too long: " + path);
  int fd = mkstemp(tmp.data());
  if (fd < 0) throw Error("cannot create a temporary file next to '" + path + "': " + std::strerror(errno));
  std::memcpy(g_pending, tmp.c_str(), tmp.size() + 1);
  g_has_pending.store(true);
  auto fail = [&](const char* step) {
    int err = errno;
    close(fd);
    unlink(tmp.c_str());
    g_has_pending.store(false);
    throw Error("cannot write '" + path + "' (" + step + "): " + std::strerror(err));
  };
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
  if (fsync(fd) != 0) fail("fsync");
  // mkstemp creates 0600; an output file should get the usual permissions (0666 minus the umask).
  mode_t mask = umask(0);
  umask(mask);
  fchmod(fd, 0666 & ~mask);
  if (close(fd) != 0) {
    int err = errno;
    unlink(tmp.c_str());
    g_has_pending.store(false);
    throw Error("cannot write '" + path + "' (close): " + std::strerror(err));
  }
  if (rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    unlink(tmp.c_str());
    g_has_pending.store(false);
    throw Error("cannot write '" + path + "' (rename): " + std::strerror(err));
  }
  g_has_pending.store(false);
}

void remove_pending_output() noexcept {
  if (g_has_pending.load()) unlink(g_pending);
}

}  // namespace strata
