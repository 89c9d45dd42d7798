#include <charconv>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include "layers/frontend/frontend.h"
#include "layers/frontend/sequence.h"
#include "layers/frontend/specs/specs.h"
#include "layers/ops/operators.h"
#include "lib/error.h"
#include "lib/nearest_name.h"

namespace strata::frontend {
namespace {

constexpr int64_t kMaxDim = std::numeric_limits<int32_t>::max();  // BLAS and CUDA index with int32

std::string quote(std::string_view s) { return quote_typed(s); }

// What an unknown op is compared with for a suggestion: every name and alias the CLI accepts.
std::vector<std::string> op_names_and_aliases() {
  std::vector<std::string> names;
  ops::AllOps::for_each([&](auto op) {
    names.emplace_back(decltype(op)::kName);
    if (!decltype(op)::kAlias.empty()) names.emplace_back(decltype(op)::kAlias);
  });
  return names;
}

}  // namespace

std::string spec_help() {
  std::string help;
  ops::AllOps::for_each([&](auto op) { help += help_line<decltype(op)>(); });
  return help;
}

std::string op_names() {
  std::string names;
  ops::AllOps::for_each([&](auto op) {
    using Op = decltype(op);
    names += (names.empty() ? "" : " | ") + std::string(Op::kName);
    if (!Op::kAlias.empty()) names += " (" + std::string(Op::kAlias) + ")";
  });
  return names;
}

int64_t size_suffix_scale(char last) {
  switch (last) {
    case 'k': case 'K': return int64_t{1} << 10;
    case 'M': return int64_t{1} << 20;
    case 'G': return int64_t{1} << 30;
    default: return 1;
  }
}

std::vector<int64_t> parse_dims(std::string_view text) {
  const std::string allowed =
      "sizes are positive integers joined by 'x', e.g. 1024 or 512x1024x256, optionally ending in k, M or G "
      "(1k = 1024, 1M = 1048576)";
  if (text.empty()) throw UsageError("missing size: " + allowed);
  std::vector<int64_t> dims;
  size_t start = 0;
  while (true) {
    size_t end = text.find('x', start);
    std::string_view field = text.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start);
    if (field.empty()) {
      throw UsageError("size " + quote(text) + " has an empty field" +
                       (start == 0 ? " at the start" : (end == std::string_view::npos ? " at the end" : "")) + ": " +
                       allowed);
    }
    const int64_t scale = size_suffix_scale(field.back());
    const std::string_view whole_field = field;
    if (scale != 1) field.remove_suffix(1);
    if (field.empty()) throw UsageError("size " + quote(text) + ": " + quote(whole_field) + " has no digits; " + allowed);
    for (char c : field) {
      if (c < '0' || c > '9') {
        std::string why = (c == '-') ? "is negative" : (c == '+') ? "has a sign" : (c == 'e' || c == 'E' || c == '.') ? "is not a whole number written in digits" : "has the character " + quote(std::string_view(&c, 1));
        throw UsageError("size " + quote(text) + ": " + quote(whole_field) + " " + why + "; " + allowed);
      }
    }
    int64_t value = 0;
    auto [ptr, ec] = std::from_chars(field.data(), field.data() + field.size(), value);
    if (ec == std::errc::result_out_of_range || value > kMaxDim / scale) {
      throw UsageError("size " + quote(whole_field) + " is too large: each size must be at most " +
                       std::to_string(kMaxDim) + " (the BLAS index limit)");
    }
    if (ec != std::errc() || ptr != field.data() + field.size()) throw UsageError("size " + quote(whole_field) + ": " + allowed);
    if (value == 0) throw UsageError("size " + quote(text) + " contains 0: every size must be at least 1");
    dims.push_back(value * scale);
    if (dims.size() > 4) throw UsageError("size " + quote(text) + " has more than 4 fields");
    if (end == std::string_view::npos) break;
    start = end + 1;
  }
  return dims;
}

OpSpec parse_op_spec(std::string_view op, std::string_view dims_text, const ConvOptions& conv) {
  OpSpec spec;
  spec.text = std::string(op) + " " + std::string(dims_text);
  bool found = false, reads_conv_options = false;
  size_t index = 0;
  ops::AllOps::for_each([&](auto decl) {
    using Op = decltype(decl);
    if (!found && (op == Op::kName || (!Op::kAlias.empty() && op == Op::kAlias))) {
      found = true;
      spec.op_index = index;
      spec.op = Op::kName;
      reads_conv_options = kReadsConvOptions<Op>;
    }
    ++index;
  });
  if (!found && is_sequence(op)) {
    throw UsageError(quote(op) + " is a sequence of ops, not one operator: strata trace and strata compare take it "
                     "(docs/sequences.md); this takes one operator:\n" + spec_help());
  }
  if (!found) {
    const std::string nearest = nearest_name(op, op_names_and_aliases());
    throw UsageError("unknown operator " + quote(op) + (nearest.empty() ? "; " : ": did you mean '" + nearest + "'? ") +
                     "strata traces:\n" + spec_help() + sequence_help());
  }
  // An option the op does not read would be silently ignored: refuse it instead.
  if (!reads_conv_options && !conv.given.empty()) {
    throw UsageError(conv.given + (conv.given.find(',') == std::string::npos ? " applies" : " apply") +
                     " to conv only; " + spec.op + " takes no conv options");
  }
  spec.dims = parse_dims(dims_text);
  spec.conv = conv;
  spec.call = ops::AllOps::visit(spec.op_index, [&](auto decl) {
    return OpSpecFormat<decltype(decl)>::call(spec.dims, spec.conv, dims_text);
  });
  if (reads_conv_options && !spec.conv.out_channels) spec.conv.out_channels = spec.dims[1];
  return spec;
}

DeviceRequest parse_device(std::string_view text) {
  DeviceRequest r;
  const std::string allowed = "allowed: auto, cpu, cuda, cuda:N";
  if (text == "auto") {
    r.automatic = true;
  } else if (text == "cpu") {
    r.device = kCPU;
  } else if (text == "cuda" || text == "gpu") {
    r.any_cuda = true;
    r.device = Device{DeviceType::kCUDA, 0};
  } else if (text.rfind("cuda:", 0) == 0 && text.size() > 5) {
    int index = -1;
    std::string_view digits = text.substr(5);
    auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), index);
    if (ec != std::errc() || ptr != digits.data() + digits.size() || index < 0 || index > 1023)
      throw UsageError("bad device " + quote(text) + ": the index after 'cuda:' must be a number like 0; " + allowed);
    r.device = Device{DeviceType::kCUDA, index};
  } else {
    throw UsageError("unknown device " + quote(text) + "; " + allowed);
  }
  return r;
}

}  // namespace strata::frontend
