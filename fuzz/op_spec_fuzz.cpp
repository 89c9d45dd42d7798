// Fuzzes what a user types after `strata trace`: the op, the sizes, the conv options, the device. The
// input is text, one field per line, so the corpus stays readable:
//   line 1: op            line 2: sizes         line 3 (optional): out-channels kernel stride pad
//   line 4 (optional): device
// Any input may be refused with a UsageError; nothing else may happen: no other exception, no crash,
// no sanitizer report, and an accepted spec must satisfy what the rest of strata relies on.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "layers/frontend/frontend.h"
#include "lib/error.h"

using namespace strata;

namespace {

std::vector<std::string_view> lines(std::string_view text) {
  std::vector<std::string_view> out;
  size_t start = 0;
  while (out.size() < 4) {
    const size_t end = text.find('\n', start);
    out.push_back(text.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start));
    if (end == std::string_view::npos) break;
    start = end + 1;
  }
  return out;
}

// The invariants an accepted spec promises (layers/frontend/frontend.h).
void check_accepted(const frontend::OpSpec& spec) {
  const size_t n = spec.dims.size();
  if (n < 1 || n > 4) std::abort();
  for (int64_t d : spec.dims)
    if (d < 1 || d > INT32_MAX) std::abort();
  if (spec.op == "matmul" || spec.op == "linear") {
    if (n != 3) std::abort();
  } else if (spec.op == "conv2d") {
    if (n != 4 || !spec.conv.out_channels || *spec.conv.out_channels < 1) std::abort();
    if (spec.conv.kernel < 1 || spec.conv.stride < 1 || spec.conv.pad < 0) std::abort();
    if (spec.conv.dilation < 1 || spec.conv.groups < 1 || spec.dims[1] % spec.conv.groups != 0) std::abort();
    const int64_t extent = spec.conv.dilation * (spec.conv.kernel - 1) + 1;
    if (extent > spec.dims[2] + 2 * spec.conv.pad) std::abort();
    if (extent > spec.dims[3] + 2 * spec.conv.pad) std::abort();
  }
  // Sizing must either give a number or refuse; signed overflow here would be a UBSan report.
  for (DType dtype : {DType::kF32, DType::kF64}) {
    try {
      const size_t bytes = frontend::required_bytes(spec, dtype);
      if (bytes > static_cast<size_t>(INT64_MAX)) std::abort();
      frontend::check_fits(bytes, size_t{1} << 30, kCPU, spec.text);
    } catch (const UsageError&) {
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const auto f = lines(text);
  try {
    frontend::parse_dims(f[0]);
  } catch (const UsageError&) {
  }
  frontend::ConvOptions conv;
  if (f.size() > 2) {
    std::istringstream in{std::string(f[2])};
    int64_t k = 0, r = 0, s = 0, p = 0;
    if (in >> k >> r >> s >> p) {
      conv.out_channels = k;
      conv.kernel = r;
      conv.stride = s;
      conv.pad = p;
    }
  }
  try {
    const frontend::OpSpec spec =
        frontend::parse_op_spec(f[0], f.size() > 1 ? f[1] : std::string_view(), conv);
    check_accepted(spec);
  } catch (const UsageError&) {
  }
  if (f.size() > 3) {
    try {
      const frontend::DeviceRequest d = frontend::parse_device(f[3]);
      if (d.device.index < 0) std::abort();
    } catch (const UsageError&) {
    }
  }
  return 0;
}
