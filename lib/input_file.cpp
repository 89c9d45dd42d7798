// Note [Reading a file strata did not write] in input_file.h.
#include "lib/input_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace strata {
namespace {

const char* kind_of(mode_t mode) {
  return S_ISDIR(mode)    ? "is a directory"
         : S_ISFIFO(mode) ? "is a named pipe (FIFO)"
         : S_ISCHR(mode)  ? "is a character device"
         : S_ISBLK(mode)  ? "is a block device"
         : S_ISSOCK(mode) ? "is a socket"
                          : "is not a regular file";
}

std::string bytes_text(uint64_t n) {
  if (n >= (uint64_t{1} << 20) && n % (uint64_t{1} << 20) == 0) return std::to_string(n >> 20) + " MiB";
  return std::to_string(n) + " bytes";
}

struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

// Opens and checks; on failure fills result.failure and result.why.
Fd open_regular(const std::string& path, InputFile& result, struct stat& st) {
  Fd f;
  f.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (f.fd < 0) {
    result.failure = InputFile::Failure::kCannotOpen;
    result.why = std::string("cannot be opened: ") + std::strerror(errno);
  } else if (::fstat(f.fd, &st) != 0) {
    result.failure = InputFile::Failure::kReadError;
    result.why = std::string("cannot be read (fstat): ") + std::strerror(errno);
  } else if (!S_ISREG(st.st_mode)) {
    result.failure = InputFile::Failure::kNotRegular;
    result.why = kind_of(st.st_mode);
  }
  return f;
}

}  // namespace

InputFile read_regular_file(const std::string& path, uint64_t max_bytes, void (*between_chunks)()) {
  InputFile result;
  struct stat st {};
  const Fd f = open_regular(path, result, st);
  if (!result.ok()) return result;
  auto too_large = [&] {
    result.failure = InputFile::Failure::kTooLarge;
    result.why = "is larger than " + bytes_text(max_bytes);
    result.bytes.clear();
    return result;
  };
  if (static_cast<uint64_t>(st.st_size) > max_bytes) return too_large();
  result.bytes.reserve(static_cast<size_t>(st.st_size));
  char buf[1 << 16];
  while (true) {
    if (between_chunks != nullptr) between_chunks();
    const ssize_t n = ::read(f.fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      result.failure = InputFile::Failure::kReadError;
      result.why = std::string("cannot be read: ") + std::strerror(errno);
      result.bytes.clear();
      return result;
    }
    if (n == 0) break;
    if (result.bytes.size() + static_cast<uint64_t>(n) > max_bytes) return too_large();
    result.bytes.append(buf, static_cast<size_t>(n));
  }
  return result;
}

std::string check_regular_file(const std::string& path) {
  InputFile result;
  struct stat st {};
  const Fd f = open_regular(path, result, st);
  return result.why;
}

}  // namespace strata
