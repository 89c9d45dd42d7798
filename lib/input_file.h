// Note [Reading a file strata did not write]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Every file strata reads whole (a trace to check, a cached kernel or PTX, a module to disassemble) goes
// through read_regular_file: opened with O_NONBLOCK (opening a FIFO cannot wait), fstat'ed, refused unless
// it is a regular file (a FIFO blocks in read(), /dev/zero never ends), refused when larger than the
// caller's bound, and the bound held again while reading (a /proc file says size 0; a file may grow).
// check_regular_file is the same check for a path handed to another program (cuobjdump), which would
// hang or read forever in strata's place.
#pragma once

#include <cstdint>
#include <string>

namespace strata {

struct InputFile {
  enum class Failure { kNone, kCannotOpen, kNotRegular, kTooLarge, kReadError };
  Failure failure = Failure::kNone;
  std::string bytes;  // the file's content when failure is kNone
  // Why not, in words that follow "it ": "is a named pipe (FIFO)", "is larger than 64.00 MiB",
  // "cannot be opened: No such file or directory".
  std::string why;
  bool ok() const { return failure == Failure::kNone; }
};

// The whole of `path` if it is a regular file of at most max_bytes; never blocks on a FIFO or device.
// `between_chunks`, when given, runs between 64 KiB reads and may throw (an interruption check).
InputFile read_regular_file(const std::string& path, uint64_t max_bytes, void (*between_chunks)() = nullptr);

// "" when `path` is a regular file that can be opened for reading, else why not (as InputFile::why).
std::string check_regular_file(const std::string& path);

}  // namespace strata
