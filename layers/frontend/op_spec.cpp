#include <charconv>
#include <cstdio>
#include <limits>
#include <string>

#include "layers/frontend/frontend.h"
#include "lib/error.h"

namespace strata::frontend {
namespace {

constexpr int64_t kMaxDim = std::numeric_limits<int32_t>::max();  // BLAS and CUDA index with int32

// What the user typed, quoted for a message. Control and non-ASCII bytes are shown as \xNN: written
// raw they would garble the terminal, and a NUL would cut the message short (what() is a C string).
std::string quote(std::string_view s) {
  std::string out = "'";
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u < 0x7f) {
      out += c;
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", u);
      out += buf;
    }
  }
  return out + "'";
}

}  // namespace

std::string spec_help() {
  return "  matmul N | MxKxN         [M,K] @ [K,N]            e.g. matmul 1024, matmul 512x1024x256\n"
         "  linear BxINxOUT          input [B,IN], weight [OUT,IN], bias [OUT]   e.g. linear 32x768x3072\n"
         "  conv NxCxHxW             input [N,C,H,W]; --out-channels K --kernel R --stride S --pad P\n"
         "                           e.g. conv 32x64x56x56 --out-channels 64 --kernel 3 --pad 1\n"
         "  relu N | shape           N elements (or a shape like 1024x1024)   e.g. relu 1048576\n"
         "  add N | shape            a + b, same shapes                         e.g. add 1048576\n";
}

std::vector<int64_t> parse_dims(std::string_view text) {
  const std::string allowed = "sizes are positive integers joined by 'x', e.g. 1024 or 512x1024x256";
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
    for (char c : field) {
      if (c < '0' || c > '9') {
        std::string why = (c == '-') ? "is negative" : (c == '+') ? "has a sign" : (c == 'e' || c == 'E' || c == '.') ? "is not a whole number written in digits" : "has the character " + quote(std::string_view(&c, 1));
        throw UsageError("size " + quote(text) + ": " + quote(field) + " " + why + "; " + allowed);
      }
    }
    int64_t value = 0;
    auto [ptr, ec] = std::from_chars(field.data(), field.data() + field.size(), value);
    if (ec == std::errc::result_out_of_range || value > kMaxDim) {
      throw UsageError("size " + quote(field) + " is too large: each size must be at most " +
                       std::to_string(kMaxDim) + " (the BLAS index limit)");
    }
    if (ec != std::errc() || ptr != field.data() + field.size()) throw UsageError("size " + quote(field) + ": " + allowed);
    if (value == 0) throw UsageError("size " + quote(text) + " contains 0: every size must be at least 1");
    dims.push_back(value);
    if (dims.size() > 4) throw UsageError("size " + quote(text) + " has more than 4 fields");
    if (end == std::string_view::npos) break;
    start = end + 1;
  }
  return dims;
}

OpSpec parse_op_spec(std::string_view op, std::string_view dims_text, const ConvOptions& conv) {
  OpSpec spec;
  spec.text = std::string(op) + " " + std::string(dims_text);
  if (op == "matmul" || op == "mm") {
    spec.kind = OpKind::kMatmul;
    spec.op = "matmul";
  } else if (op == "linear") {
    spec.kind = OpKind::kLinear;
    spec.op = "linear";
  } else if (op == "conv" || op == "conv2d") {
    spec.kind = OpKind::kConv;
    spec.op = "conv2d";
  } else if (op == "relu") {
    spec.kind = OpKind::kRelu;
    spec.op = "relu";
  } else if (op == "add") {
    spec.kind = OpKind::kAdd;
    spec.op = "add";
  } else {
    throw UsageError("unknown op " + quote(op) + "; strata traces:\n" + spec_help());
  }
  if (spec.kind != OpKind::kConv && !conv.given.empty()) {
    throw UsageError(conv.given + (conv.given.find(',') == std::string::npos ? " applies" : " apply") +
                     " to conv only; " + spec.op + " takes no conv options");
  }
  spec.dims = parse_dims(dims_text);
  const size_t n = spec.dims.size();
  switch (spec.kind) {
    case OpKind::kMatmul:
      if (n == 1) spec.dims = {spec.dims[0], spec.dims[0], spec.dims[0]};
      else if (n != 3) throw UsageError("matmul takes N (square) or MxKxN, got " + quote(dims_text));
      break;
    case OpKind::kLinear:
      if (n != 3) throw UsageError("linear takes BxINxOUT (batch, in features, out features), got " + quote(dims_text));
      break;
    case OpKind::kConv: {
      if (n != 4) throw UsageError("conv takes NxCxHxW (batch, channels, height, width), got " + quote(dims_text));
      spec.conv = conv;
      if (!spec.conv.out_channels) spec.conv.out_channels = spec.dims[1];
      if (*spec.conv.out_channels < 1 || *spec.conv.out_channels > kMaxDim)
        throw UsageError("--out-channels must be between 1 and " + std::to_string(kMaxDim) + ", got " + std::to_string(*spec.conv.out_channels));
      if (spec.conv.kernel < 1 || spec.conv.kernel > kMaxDim) throw UsageError("--kernel must be between 1 and " + std::to_string(kMaxDim) + ", got " + std::to_string(spec.conv.kernel));
      if (spec.conv.stride < 1 || spec.conv.stride > kMaxDim) throw UsageError("--stride must be between 1 and " + std::to_string(kMaxDim) + ", got " + std::to_string(spec.conv.stride));
      if (spec.conv.pad < 0 || spec.conv.pad > kMaxDim) throw UsageError("--pad must be between 0 and " + std::to_string(kMaxDim) + ", got " + std::to_string(spec.conv.pad));
      const int64_t h = spec.dims[2] + 2 * spec.conv.pad, w = spec.dims[3] + 2 * spec.conv.pad;
      if (spec.conv.kernel > h || spec.conv.kernel > w) {
        throw UsageError("conv: --kernel " + std::to_string(spec.conv.kernel) + " is larger than the padded input " +
                         std::to_string(h) + "x" + std::to_string(w) + " (use a smaller --kernel or more --pad)");
      }
      break;
    }
    case OpKind::kRelu:
    case OpKind::kAdd:
      break;
  }
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
