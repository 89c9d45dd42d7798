// Output files (JSON reports, Chrome traces) are written atomically: to a temporary file in the same
// directory, flushed, then renamed over the target. A failed or interrupted run leaves either the old
// file or the new one, never a partial one. See docs/errors.md.
#pragma once

#include <string>

namespace strata {

// Refuses, before any work is done, a path that cannot be written: a missing or unwritable directory,
// an existing directory, an empty path. Throws UsageError naming the path and the reason.
void check_output_path(const std::string& path);

// Writes `contents` to `path` atomically. Throws Error (with errno's text) and leaves nothing behind on
// failure, including a full file system.
void write_file_atomically(const std::string& path, const std::string& contents);

// Removes the temporary file of a write in progress; async-signal-safe, for the SIGINT/SIGTERM handler.
void remove_pending_output() noexcept;

}  // namespace strata
