// Role: format (header-only, shared by every --json writer: the reports' views and the commands that add
// their own objects to them).
//
// Note [JSON text is valid UTF-8]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// nlohmann/json refuses to write a string that is not UTF-8 (type_error 316). Every name strata writes is
// its own (an op, a kernel, a zone), so such a string is a bug upstream: a name read through a pointer into
// freed memory (Note [A zone's name outlives the zone] in apps/cuda_module/compiled_kernels_cuda.cpp) once
// turned a finished `trace gelu_tanh --mode compiled --device cuda` into "internal error" and no file.
// That bug is fixed where it was; this is the second line. A measured run is worth its file, so each byte
// that is not UTF-8 is written as U+FFFD, and the document says so at its top ("invalid_utf8_replaced"), for
// the command to warn about (json_text_replaced_bytes): the bug stays visible, the figures are kept.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace strata::reports {

inline constexpr const char* kInvalidUtf8Key = "invalid_utf8_replaced";

// `doc` as the --json file's text, indented by 2, ending in a newline; see the Note above for a string that
// is not UTF-8.
inline std::string json_text(const nlohmann::json& doc) {
  try {
    return doc.dump(2) + "\n";
  } catch (const nlohmann::json::type_error& e) {
    if (e.id != 316) throw;  // only "invalid UTF-8 byte" is repaired; anything else is a bug to report
  }
  nlohmann::json marked = doc;
  if (marked.is_object()) {
    marked[kInvalidUtf8Key] =
        "some strings held bytes that are not UTF-8, each written as U+FFFD: a name read from freed memory "
        "does this, a bug in strata to report";
  }
  return marked.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

// True when json_text had to replace bytes in the document `text` (or in one it was parsed from: the mark
// is a top-level key and survives a parse and a second json_text).
inline bool json_text_replaced_bytes(std::string_view text) {
  return text.find(std::string("\"") + kInvalidUtf8Key + "\"") != std::string_view::npos;
}

// What a writer says when json_text_replaced_bytes(text) is true of what it wrote to `where` (the CLI on
// stderr, strata.profile() as a RuntimeWarning).
inline std::string json_text_replaced_warning(const std::string& where) {
  return where + ": some strings held bytes that are not UTF-8, written as U+FFFD (\"" + kInvalidUtf8Key +
         "\" in the document); a bug in strata, please report it";
}

}  // namespace strata::reports
