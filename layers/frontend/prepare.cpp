#include <algorithm>
#include <bit>
#include <charconv>
#include <cstdio>
#include <fstream>
#include <optional>
#include <utility>
#include <random>
#include <span>
#include <type_traits>
#include <string>

#include "layers/frontend/frontend.h"
#include "layers/ops/operators.h"
#include "layers/kernels/reference/reference.h"
#include "lib/error.h"
#include "lib/op_shapes.h"
#include "lib/views.h"
#include "lib/zone.h"

namespace strata::frontend {
namespace {

using binding::IValue;

// Each tensor's bytes are lib's one overflow-checked count (Note [One byte count], saturated at 2^64),
// summed in 128 bits and refused past 2^63: "matmul 99999x99999x99999" must be a clear refusal, never a
// wrapped-around small allocation (an im2col workspace is a product of five sizes of up to ~2^33 each).
class ByteCount {
 public:
  void add_tensor(std::span<const int64_t> dims, size_t element) { total_ += byte_count(dims, element); }
  size_t value(const OpSpec& spec) const {
    if (total_ > kMaxTensorBytes) {
      throw UsageError(spec.text + " would need more than 2^63 bytes; choose smaller sizes");
    }
    return static_cast<size_t>(total_);
  }

 private:
  unsigned __int128 total_ = 0;
};

// Calls Op's float64 reference with `args`, converted as the binding layer converts them for a kernel.
template <typename Op, typename Signature = typename Op::Signature>
struct ReferenceCall;
template <typename Op, typename... Args>
struct ReferenceCall<Op, Tensor(Args...)> {
  static std::vector<double> run(const binding::Schema& schema, const std::vector<IValue>& given) {
    std::vector<IValue> args = given;
    for (size_t i = args.size(); i < schema.arguments.size(); ++i) args.push_back(*schema.arguments[i].default_value);
    return run(args, std::index_sequence_for<Args...>{});
  }
  template <size_t... I>
  static std::vector<double> run(const std::vector<IValue>& a, std::index_sequence<I...>) {
    return Op::kReference(binding::unbox<Args>(a[I])...);
  }
};
// The same for Op's float64 gradients, given the gradient of its output.
template <typename Op, typename Signature = typename Op::Signature>
struct ReferenceBackwardCall;
template <typename Op, typename... Args>
struct ReferenceBackwardCall<Op, Tensor(Args...)> {
  static reference::Grads run(const binding::Schema& schema, const std::vector<IValue>& given, const Tensor& grad) {
    std::vector<IValue> args = given;
    for (size_t i = args.size(); i < schema.arguments.size(); ++i) args.push_back(*schema.arguments[i].default_value);
    return run(args, grad, std::index_sequence_for<Args...>{});
  }
  template <size_t... I>
  static reference::Grads run(const std::vector<IValue>& a, const Tensor& grad, std::index_sequence<I...>) {
    return Op::kReferenceBackward(grad, binding::unbox<Args>(a[I])...);
  }
};

template <typename Op>
std::vector<double> call_reference(const binding::Schema& schema, const std::vector<IValue>& args) {
  return ReferenceCall<Op>::run(schema, args);
}

}  // namespace

size_t required_bytes(const OpSpec& spec, DType dtype) {
  const size_t e = element_size(dtype);
  ByteCount bytes;
  auto add = [&](const Shape& s) { bytes.add_tensor(std::span<const int64_t>(s.dims.data(), size_t(s.ndim)), e); };
  for (const SpecArg& a : spec.call.args)
    if (a.is_tensor) add(a.shape);
  for (const Shape& s : spec.call.outputs) add(s);
  if (!spec.call.workspace_dims.empty()) bytes.add_tensor(spec.call.workspace_dims, e);
  return bytes.value(spec);
}

size_t peak_bytes(const OpSpec& spec, DType given, DType computed, const Device& device) {
  // Note [Half types on the CPU]: a half-precision kernel there runs on f32 copies of its operands, makes
  // an f32 output, and its workspace (conv's columns) is f32 too.
  // A view computes nothing: no widened copies, and its output is a header (SpecCall::output_is_view).
  const bool view = spec.call.output_is_view;
  const bool widened = !view && device.is_cpu() && (computed == DType::kBF16 || computed == DType::kF16);
  ByteCount bytes;
  auto add_tensors = [&](DType dtype, bool outputs) {
    for (const SpecArg& a : spec.call.args)
      if (a.is_tensor) bytes.add_tensor(std::span<const int64_t>(a.shape.dims.data(), size_t(a.shape.ndim)), element_size(dtype));
    if (outputs && !view)
      for (const Shape& o : spec.call.outputs) bytes.add_tensor(std::span<const int64_t>(o.dims.data(), size_t(o.ndim)), element_size(dtype));
  };
  add_tensors(computed, true);
  if (widened) add_tensors(DType::kF32, true);
  if (computed != given) add_tensors(given, false);  // autocast: the given inputs live on beside their casts
  if (!spec.call.workspace_dims.empty())
    bytes.add_tensor(spec.call.workspace_dims, element_size(widened ? DType::kF32 : computed));
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

// The reclaimable page cache a cgroup's usage counts ("inactive_file" in memory.stat, v1 and v2 alike):
// usage includes it, but the kernel drops it before it would OOM-kill, so it is available.
size_t cgroup_inactive_file(const char* stat_path) {
  std::ifstream in(stat_path);
  std::string key;
  size_t value = 0;
  while (in >> key >> value) {
    if (key == "inactive_file" || key == "total_inactive_file") return value;
  }
  return 0;
}

}  // namespace

HostMemory host_memory() {
  HostMemory m{SIZE_MAX, "unknown: no MemAvailable in /proc/meminfo"};  // let the allocator decide
  std::ifstream meminfo("/proc/meminfo");
  std::string line;
  while (std::getline(meminfo, line)) {
    size_t kib = 0;
    if (std::sscanf(line.c_str(), "MemAvailable: %zu kB", &kib) == 1) {
      m = {kib * 1024, "MemAvailable in /proc/meminfo"};
      break;
    }
  }
  // In a container the cgroup limit binds first: MemAvailable describes the whole machine, and a request
  // that fits there but not in the cgroup ends with the OOM killer instead of a refusal. v2, then v1.
  struct Cgroup {
    const char* limit;
    const char* usage;
    const char* stat;
  };
  const Cgroup cgroups[] = {
      {"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current", "/sys/fs/cgroup/memory.stat"},
      {"/sys/fs/cgroup/memory/memory.limit_in_bytes", "/sys/fs/cgroup/memory/memory.usage_in_bytes",
       "/sys/fs/cgroup/memory/memory.stat"}};
  for (const Cgroup& c : cgroups) {
    const std::optional<size_t> limit = read_cgroup_bytes(c.limit);
    if (!limit) continue;
    const size_t usage = read_cgroup_bytes(c.usage).value_or(0);
    const size_t cache = std::min(usage, cgroup_inactive_file(c.stat));
    const size_t used = usage - cache;
    const size_t left = *limit > used ? *limit - used : 0;
    if (left < m.bytes) {
      m = {left, std::string(c.limit) + " " + format_bytes(double(*limit)) + " minus " + c.usage + " " +
                     format_bytes(double(usage)) + " less its inactive page cache " + format_bytes(double(cache))};
    }
    break;
  }
  return m;
}

size_t available_host_bytes() { return host_memory().bytes; }

std::string HostMemory::str() const {
  return std::to_string(bytes / (1024 * 1024)) + " MiB available (" + source + ")";
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
  // Uniform in [-1, 1): both signs (relu has something to clip), exactly representable magnitudes in every
  // dtype's range, and never a zero. A draw that is 0 as the dtype holds it is drawn again: the float
  // distribution returns exactly 0 about once in 2^24 draws (-1 + 2u with u rounded to 0.5), so a
  // 1M-element input held a zero for about one seed in 20. Its nonzero draws are at least 2^-24 in
  // magnitude, which f16 still holds (its smallest subnormal); the check is by the stored value all the same.
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  auto nonzero = [&] {
    float v;
    do v = dist(rng);
    while (v == 0.0f);
    return v;
  };
  // For the 16-bit types, by the bits they store (0x0000 and 0x8000 are the two zeros).
  auto nonzero_bits = [&](uint16_t (*to_bits)(float)) {
    uint16_t bits;
    do bits = to_bits(nonzero());
    while ((bits & 0x7fff) == 0);
    return bits;
  };
  const int64_t n = host.numel();
  switch (dtype) {
    case DType::kF32:
      for (int64_t i = 0; i < n; ++i) host.data<float>()[i] = nonzero();
      break;
    case DType::kF64:
      for (int64_t i = 0; i < n; ++i) host.data<double>()[i] = nonzero();
      break;
    case DType::kF16:
      for (int64_t i = 0; i < n; ++i) host.data<uint16_t>()[i] = nonzero_bits(&reference::float_to_half);
      break;
    case DType::kBF16:
      for (int64_t i = 0; i < n; ++i) host.data<uint16_t>()[i] = nonzero_bits(&reference::float_to_bf16);
      break;
  }
  return host.to(device);
}

PreparedCall prepare_call(const OpSpec& spec, DType dtype, Device device, uint64_t seed, bool requires_grad,
                          size_t available_bytes, std::optional<DType> computed) {
  STRATA_ZONE(zone, Layer::kFrontend, "prepare inputs");
  PreparedCall call;
  const DType in = computed.value_or(dtype);
  call.bytes = peak_bytes(spec, dtype, in, device);  // Note [Peak bytes of a call]
  check_fits(call.bytes, available_bytes, device,
             spec.text + " (" + std::string(dtype_name(dtype)) + (in == dtype ? "" : " computed in " + std::string(dtype_name(in))) + ")");
  call.op = &binding::find_operator(spec.op);
  // Each tensor gets its own stream of the seed (its position among the tensors, from 1) so that
  // changing one shape does not change the others.
  uint64_t stream = 0;
  for (const SpecArg& a : spec.call.args) {
    if (a.is_tensor) {
      Tensor t = random_tensor(a.shape, dtype, device, seed * 1000003 + ++stream);
      t.set_requires_grad(requires_grad);
      call.args.emplace_back(std::move(t));
    } else if (a.is_int_list) {
      call.args.emplace_back(a.shape);
    } else {
      call.args.emplace_back(a.value);
    }
  }
  call.description = spec.call.description;
  call.gemm_shape = spec.call.gemm_shape;
  call.flops = spec.call.flops;
  call.bytes_moved = spec.call.elements_moved * double(element_size(dtype));
  return call;
}

std::vector<double> reference_result(const OpSpec& spec, const PreparedCall& call) {
  // The reference takes the op's own arguments; those the spec leaves out take the schema's defaults
  // (add's alpha), exactly as the binding layer fills them in for the kernel.
  return ops::AllOps::visit(spec.op_index, [&](auto decl) {
    using Op = decltype(decl);
    return call_reference<Op>(call.op->schema(), call.args);
  });
}

size_t saved_by_node(const OpSpec& spec) {
  return ops::AllOps::visit(spec.op_index, [&](auto decl) -> size_t {
    using Op = decltype(decl);
    return static_cast<size_t>(std::popcount(Op::kBackward.saved_inputs)) + (Op::kBackward.saves_result ? 1 : 0);
  });
}

namespace {

// Whether Op has a backward formula, and a float64 reference for it (--backward --check needs both).
template <typename Op>
constexpr bool has_backward() {
  return requires { Op::kReferenceBackward; } && ops::backward_formula<Op>() != nullptr;
}

}  // namespace

bool differentiable(const OpSpec& spec) {
  return ops::AllOps::visit(spec.op_index, [&](auto decl) { return has_backward<decltype(decl)>(); });
}

std::string differentiable_op_names() {
  std::string names;
  ops::AllOps::for_each([&](auto decl) {
    using Op = decltype(decl);
    if (has_backward<Op>()) names += (names.empty() ? "" : ", ") + std::string(Op::kName);
  });
  return names;
}

reference::Grads reference_gradients(const OpSpec& spec, const PreparedCall& call, const Tensor& grad) {
  return ops::AllOps::visit(spec.op_index, [&](auto decl) -> reference::Grads {
    using Op = decltype(decl);
    if constexpr (requires { Op::kReferenceBackward; }) {
      return ReferenceBackwardCall<Op>::run(call.op->schema(), call.args, grad);
    } else {
      throw UsageError(spec.op + " has no derivative in strata (it is a gradient op itself)");
    }
  });
}

Tensor make_input_view(const Tensor& arg, const std::string& name, std::string_view kind, uint64_t seed,
                       size_t available_bytes, Tensor& base) {
  if (kind == "t") {
    if (arg.dim() != 2) {
      throw UsageError("--view " + name + "=t: '" + name + "' is [" + arg.sizes().str() +
                       "]; a transposed view needs a 2-D argument");
    }
    base = random_tensor(Shape{arg.size(1), arg.size(0)}, arg.dtype(), arg.device(), seed);
    return views::transpose(base, 0, 1);
  }
  int64_t step = 0;
  if (kind.rfind("slice", 0) == 0) {
    const std::string_view digits = kind.substr(5);
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), step);
    if (ec != std::errc() || end != digits.data() + digits.size()) step = 0;
  }
  if (step < 2 || step > 64 || arg.dim() == 0) {
    throw UsageError("--view " + name + "=" + std::string(kind) + ": unknown view; allowed: t (a transposed view, " +
                     "2-D arguments), sliceN with N from 2 to 64 (every N-th element of the last dim)");
  }
  Shape wide = arg.sizes();
  const int last = arg.dim() - 1;
  if (__builtin_mul_overflow(wide[last], step, &wide[last])) wide[last] = INT64_MAX;  // refused just below
  const unsigned __int128 bytes = byte_count(std::span<const int64_t>(wide.dims.data(), size_t(wide.ndim)),
                                             element_size(arg.dtype()));
  check_fits(bytes > kMaxTensorBytes ? SIZE_MAX : static_cast<size_t>(bytes), available_bytes, arg.device(),
             "--view " + name + "=" + std::string(kind) + " (a buffer " + std::to_string(step) + "x the size of '" +
                 name + "')");
  base = random_tensor(wide, arg.dtype(), arg.device(), seed);
  return views::slice(base, last, 0, wide[last], step);
}

void apply_input_views(PreparedCall& call, const std::vector<std::string>& views, uint64_t seed, size_t available_bytes) {
  const binding::Schema& schema = call.op->schema();
  std::string tensors;
  for (size_t i = 0; i < call.args.size(); ++i)
    if (call.args[i].is_tensor()) tensors += (tensors.empty() ? "" : ", ") + schema.arguments[i].name;
  uint64_t stream = 0;
  for (const std::string& v : views) {
    const size_t eq = v.find('=');
    const std::string name = v.substr(0, eq);
    size_t i = 0;
    while (i < call.args.size() && !(schema.arguments[i].name == name && call.args[i].is_tensor())) ++i;
    if (eq == std::string::npos || i == call.args.size()) {
      throw UsageError("--view " + quote_typed(v) + ": expected NAME=KIND with NAME a tensor argument of " +
                       schema.name + " (" + tensors + ")");
    }
    // One view per operand, as apply_sequence_views says: a second one would replace the first unseen.
    for (const PreparedCall::InputView& earlier : call.views) {
      if (earlier.arg == i) {
        throw UsageError("--view " + name + " is given twice (" + earlier.kind + " and " + v.substr(eq + 1) +
                         "); give one view per tensor");
      }
    }
    const Tensor& arg = call.args[i].tensor();
    Tensor base;
    Tensor view = make_input_view(arg, name, std::string_view(v).substr(eq + 1), seed * 1000003 + 1000 + ++stream,
                                  available_bytes, base);
    call.views.push_back({i, base, v.substr(eq + 1)});
    view.set_requires_grad(arg.requires_grad());
    call.description += "  (" + name + ": " + v.substr(eq + 1) + " view, strides " + view.strides().str() + ")";
    call.args[i] = binding::IValue(std::move(view));
  }
}

}  // namespace strata::frontend
