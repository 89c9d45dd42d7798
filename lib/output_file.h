// Output files (JSON reports, Chrome traces) are written atomically: to a temporary file in the same
// directory, flushed, then renamed over the target. A failed or interrupted run leaves either the old
// file or the new one, never a partial one. See docs/errors.md.
#pragma once

#include <string>

namespace strata {

// Refuses, before any work is done, a path that cannot be written: a missing or unwritable directory
// (tested by creating and removing a temporary file there, which also holds for root), an existing
// directory, an empty path, a named pipe, socket or block device (a FIFO would block in open()). Throws UsageError naming the path and the reason.
void check_output_path(const std::string& path);

// Writes `contents` to `path` atomically. Throws Error (with errno's text) and leaves nothing behind on
// failure, including a full file system. A device, FIFO or stream alias (/dev/null, /dev/stdout) is
// written in place instead (appended to), never replaced: see writes_in_place() in output_file.cpp.
void write_file_atomically(const std::string& path, const std::string& contents);

// Whether two output paths name the same file ("a.json", "./a.json", a symlink to it), whether or not
// it exists yet.
bool same_output_file(const std::string& a, const std::string& b);

// Removes the temporary file of a write in progress; async-signal-safe, for the SIGINT/SIGTERM handler.
void remove_pending_output() noexcept;

// Makes every write from now on, and one waiting for a slow reader (a pipe behind /dev/stdout, a
// terminal), throw Error with ExitCode::kInterrupted instead of waiting; async-signal-safe, for the
// first SIGINT/SIGTERM.
void interrupt_output_writes() noexcept;

}  // namespace strata
