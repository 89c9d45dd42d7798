#include <algorithm>
#include <charconv>
#include <fstream>
#include <optional>
#include <utility>
#include <random>
#include <string>

#include "layers/frontend/frontend.h"
#include "layers/kernels/reference/reference.h"
#include "lib/error.h"
#include "lib/op_shapes.h"
#include "lib/zone.h"

namespace strata::frontend {
namespace {

using binding::IValue;

// Sizes multiply in 128 bits and are refused past 2^63: "matmul 99999x99999x99999" must be a clear
// refusal, never a wrapped-around small allocation. Even 128 bits wrap: an im2col workspace is a product
// of five sizes of up to ~2^33 each, so every partial product saturates at 2^64 (anything that large is
// refused anyway, and 2^64 times one more size still fits in 128 bits).
class ByteCount {
 public:
  void add_tensor(std::initializer_list<int64_t> dims, size_t element) {
    constexpr unsigned __int128 kSaturated = static_cast<unsigned __int128>(1) << 64;
    unsigned __int128 n = element;
    for (int64_t d : dims) n = std::min(n * static_cast<unsigned __int128>(d), kSaturated);
    total_ += n;
  }
  size_t value(const OpSpec& spec) const {
    if (total_ > static_cast<unsigned __int128>(INT64_MAX)) {
      throw UsageError(spec.text + " would need more than 2^63 bytes; choose smaller sizes");
    }
    return static_cast<size_t>(total_);
  }

 private:
  unsigned __int128 total_ = 0;
};

Shape shape_of(const std::vector<int64_t>& dims) {
  Shape s;
  for (int64_t d : dims) s[s.ndim++] = d;
  return s;
}

}  // namespace

size_t required_bytes(const OpSpec& spec, DType dtype) {
  const size_t e = element_size(dtype);
  const auto& d = spec.dims;
  ByteCount bytes;
  switch (spec.kind) {
    case OpKind::kMatmul:  // A, B, C
      bytes.add_tensor({d[0], d[1]}, e);
      bytes.add_tensor({d[1], d[2]}, e);
      bytes.add_tensor({d[0], d[2]}, e);
      break;
    case OpKind::kLinear:  // input, weight, bias, output
      bytes.add_tensor({d[0], d[1]}, e);
      bytes.add_tensor({d[2], d[1]}, e);
      bytes.add_tensor({d[2]}, e);
      bytes.add_tensor({d[0], d[2]}, e);
      break;
    case OpKind::kConv: {
      const int64_t k = *spec.conv.out_channels, r = spec.conv.kernel;
      const int64_t oh = (d[2] + 2 * spec.conv.pad - r) / spec.conv.stride + 1;
      const int64_t ow = (d[3] + 2 * spec.conv.pad - r) / spec.conv.stride + 1;
      bytes.add_tensor({d[0], d[1], d[2], d[3]}, e);  // input
      bytes.add_tensor({k, d[1], r, r}, e);           // weight
      bytes.add_tensor({k}, e);                       // bias
      bytes.add_tensor({d[0], k, oh, ow}, e);         // output
      bytes.add_tensor({d[1], r, r, oh, ow}, e);      // im2col columns of one image (the CPU workspace)
      break;
    }
    case OpKind::kRelu:
    case OpKind::kAdd: {
      int64_t n = 1;
      for (int64_t x : d) {
        if (__builtin_mul_overflow(n, x, &n)) throw UsageError(spec.text + " has more than 2^63 elements");
      }
      const int tensors = spec.kind == OpKind::kAdd ? 3 : 2;
      for (int i = 0; i < tensors; ++i) bytes.add_tensor({n}, e);
      break;
    }
  }
  return bytes.value(spec);
}

namespace {

// A number read from a cgroup file; nullopt for "max", a missing file or anything unparsable.
std::optional<size_t> read_cgroup_bytes(const char* path) {
  std::ifstream in(path);
  std::string text;
  if (!(in >> text) || text == "max") return std::nullopt;
  size_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

}  // namespace

size_t available_host_bytes() {
  size_t available = SIZE_MAX;  // unknown: let the allocator decide
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  size_t kib = 0;
  std::string unit;
  while (meminfo >> key >> kib >> unit) {
    if (key == "MemAvailable:") {
      available = kib * 1024;
      break;
    }
  }
  // In a container the cgroup limit binds first: MemAvailable describes the whole machine, and a request
  // that fits there but not in the cgroup ends with the OOM killer instead of a refusal. v2, then v1.
  const std::pair<const char*, const char*> cgroups[] = {
      {"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"},
      {"/sys/fs/cgroup/memory/memory.limit_in_bytes", "/sys/fs/cgroup/memory/memory.usage_in_bytes"}};
  for (const auto& [limit_path, usage_path] : cgroups) {
    const std::optional<size_t> limit = read_cgroup_bytes(limit_path);
    if (!limit) continue;
    const size_t used = read_cgroup_bytes(usage_path).value_or(0);
    available = std::min(available, *limit > used ? *limit - used : 0);
    break;
  }
  return available;
}

void check_fits(size_t bytes, size_t available, const Device& device, const std::string& what) {
  if (bytes > available) {
    throw UsageError(what + " needs " + format_bytes(double(bytes)) + " on " + device.str() + " but only " +
                     format_bytes(double(available)) + " is available; choose smaller sizes");
  }
}

Tensor random_tensor(const Shape& shape, DType dtype, Device device, uint64_t seed) {
  Tensor host = Tensor::empty(shape, dtype, kCPU);
  std::mt19937_64 rng(seed);
  // Uniform in [-1, 1): never zeros, both signs (relu has something to clip), exactly representable
  // magnitudes in every dtype's range.
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  const int64_t n = host.numel();
  switch (dtype) {
    case DType::kF32:
      for (int64_t i = 0; i < n; ++i) host.data<float>()[i] = dist(rng);
      break;
    case DType::kF64:
      for (int64_t i = 0; i < n; ++i) host.data<double>()[i] = dist(rng);
      break;
    case DType::kF16:
      for (int64_t i = 0; i < n; ++i) host.data<uint16_t>()[i] = reference::float_to_half(dist(rng));
      break;
    case DType::kBF16:
      for (int64_t i = 0; i < n; ++i) host.data<uint16_t>()[i] = reference::float_to_bf16(dist(rng));
      break;
  }
  return host.to(device);
}

PreparedCall prepare_call(const OpSpec& spec, DType dtype, Device device, uint64_t seed, bool requires_grad,
                          size_t available_bytes) {
  STRATA_ZONE(zone, Layer::kFrontend, "prepare inputs");
  PreparedCall call;
  call.bytes = required_bytes(spec, dtype);
  check_fits(call.bytes, available_bytes, device, spec.text + " (" + std::string(dtype_name(dtype)) + ")");
  call.op = &binding::find_operator(spec.op);
  const auto& d = spec.dims;
  // Each tensor gets its own stream of the seed so that changing one shape does not change the others.
  auto make = [&](const Shape& shape, uint64_t stream, bool grad) {
    Tensor t = random_tensor(shape, dtype, device, seed * 1000003 + stream);
    t.set_requires_grad(grad);
    return t;
  };
  switch (spec.kind) {
    case OpKind::kMatmul:
      call.args = {make({d[0], d[1]}, 1, requires_grad), make({d[1], d[2]}, 2, requires_grad)};
      call.description = "[" + std::to_string(d[0]) + "x" + std::to_string(d[1]) + "] @ [" + std::to_string(d[1]) +
                         "x" + std::to_string(d[2]) + "]";
      call.gemm_shape = Shape{d[0], d[1], d[2]}.str();
      call.flops = 2.0 * double(d[0]) * double(d[1]) * double(d[2]);
      break;
    case OpKind::kLinear:
      call.args = {make({d[0], d[1]}, 1, requires_grad), make({d[2], d[1]}, 2, requires_grad),
                   make({d[2]}, 3, requires_grad)};
      call.description = "input [" + std::to_string(d[0]) + "x" + std::to_string(d[1]) + "] weight [" +
                         std::to_string(d[2]) + "x" + std::to_string(d[1]) + "] bias [" + std::to_string(d[2]) + "]";
      call.gemm_shape = Shape{d[0], d[1], d[2]}.str();
      call.flops = 2.0 * double(d[0]) * double(d[1]) * double(d[2]) + double(d[0]) * double(d[2]);
      break;
    case OpKind::kConv: {
      const int64_t k = *spec.conv.out_channels, r = spec.conv.kernel;
      Tensor input = make({d[0], d[1], d[2], d[3]}, 1, requires_grad);
      Tensor weight = make({k, d[1], r, r}, 2, requires_grad);
      auto g = op_shapes::conv2d(input.sizes(), weight.sizes(), nullptr, spec.conv.stride, spec.conv.pad);
      call.args = {input, weight, make({k}, 3, requires_grad), IValue(spec.conv.stride), IValue(spec.conv.pad)};
      call.description = "input [" + input.sizes().str() + "] weight [" + weight.sizes().str() + "] stride " +
                         std::to_string(spec.conv.stride) + " pad " + std::to_string(spec.conv.pad) + " -> [" +
                         g.output().str() + "]";
      call.gemm_shape = Shape{k, d[1] * r * r, g.out_height * g.out_width}.str();
      call.flops = 2.0 * double(d[0]) * double(k) * double(d[1]) * double(r * r) * double(g.out_height) *
                   double(g.out_width);
      break;
    }
    case OpKind::kRelu:
    case OpKind::kAdd: {
      Shape s = shape_of(d);
      if (spec.kind == OpKind::kRelu) {
        call.args = {make(s, 1, requires_grad)};
        call.description = "[" + s.str() + "]";
        call.flops = double(s.numel());
        call.bytes_moved = 2.0 * double(s.numel()) * double(element_size(dtype));  // read x, write y
      } else {
        call.args = {make(s, 1, requires_grad), make(s, 2, requires_grad)};
        call.description = "[" + s.str() + "] + [" + s.str() + "]";
        call.flops = double(s.numel());
        call.bytes_moved = 3.0 * double(s.numel()) * double(element_size(dtype));  // read a and b, write out
      }
      break;
    }
  }
  return call;
}

std::vector<double> reference_result(const OpSpec& spec, const PreparedCall& call) {
  const auto& a = call.args;
  switch (spec.kind) {
    case OpKind::kMatmul: return reference::matmul(a[0].tensor(), a[1].tensor());
    case OpKind::kLinear: return reference::linear(a[0].tensor(), a[1].tensor(), a[2].tensor());
    case OpKind::kConv:
      return reference::conv2d(a[0].tensor(), a[1].tensor(), a[2].tensor(), spec.conv.stride, spec.conv.pad);
    case OpKind::kRelu: return reference::relu(a[0].tensor());
    case OpKind::kAdd: return reference::add(a[0].tensor(), a[1].tensor(), 1.0);
  }
  return {};
}

}  // namespace strata::frontend
