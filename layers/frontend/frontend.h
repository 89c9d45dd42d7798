// The frontend: turns what the user typed ("matmul 1024", "conv 32x64x56x56 --out-channels 64 ...")
// into an OpSpec, refuses anything malformed or too large for the device BEFORE allocating, and creates
// the input tensors from a seeded RNG. Every refusal is a UsageError that names what was wrong and what
// is allowed.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "layers/binding/binding.h"
#include "layers/frontend/spec_call.h"
#include "layers/kernels/reference/reference.h"
#include "lib/device.h"
#include "lib/dtype.h"

namespace strata::frontend {

struct OpSpec {
  size_t op_index = 0;  // the operator's position in ops::AllOps
  std::string op;       // the operator's name (matmul, linear, conv2d, relu, add), whatever alias was typed
  std::string text;     // what the user typed, for messages
  // The sizes as the op reads them: matmul M, K, N (N alone is square); linear B, IN, OUT; conv2d N, C, H,
  // W; relu/add the tensor's shape.
  std::vector<int64_t> dims;
  ConvOptions conv;     // as given; conv2d's spec fills in the defaults it used
  SpecCall call;        // the call this spec means (its OpSpecFormat: layers/frontend/specs)
};

// The ops `strata trace` accepts and their spec formats, for --help and error messages.
std::string spec_help();
// Their names, "matmul | linear | conv2d | ...", and the names of those with a backward formula (what
// --backward applies to), "matmul, linear, ...": derived from the declarations, so no list goes stale.
std::string op_names();
std::string differentiable_op_names();

// Parses a size list "1024", "512x1024x256", "1M", "4x1k". A field may end in k, M or G (binary: 1k =
// 1024, 1M = 2^20, 1G = 2^30, as tensor sizes usually are, and as sweep ranges read them). Throws
// UsageError for empty fields, signs, exponents, zero, stray characters and values beyond 2^31-1 (the
// BLAS index limit).
std::vector<int64_t> parse_dims(std::string_view text);

// The multiplier a size's last character stands for: k/K 2^10, M 2^20, G 2^30; 1 for anything else.
int64_t size_suffix_scale(char last);

OpSpec parse_op_spec(std::string_view op, std::string_view dims, const ConvOptions& conv = {});

// "cpu", "cuda", "cuda:N" (and "auto", which the caller resolves). Throws UsageError.
struct DeviceRequest {
  bool automatic = false;
  bool any_cuda = false;  // "cuda" without an index
  Device device;
};
DeviceRequest parse_device(std::string_view text);

struct PreparedCall {
  const binding::BoundOperator* op = nullptr;
  std::vector<binding::IValue> args;
  std::string description;  // "[1024x1024] @ [1024x1024]"
  std::string gemm_shape;   // "1024x1024x1024" (MxKxN) for GEMM-based ops, "" otherwise
  double flops = 0;         // floating-point operations of one call
  double bytes_moved = 0;   // memory-bound ops (relu, add): bytes one call must read and write; else 0
  size_t bytes = 0;         // the most the call holds at once (peak_bytes): what was checked
  // --view's inputs (apply_input_views): argument `arg` is a view of `base` of kind `kind` ("t",
  // "slice2"), so that a front end that makes its own inputs (--frontend python) builds the same view
  // over the same buffer with its own API.
  struct InputView {
    size_t arg = 0;
    Tensor base;
    std::string kind;
  };
  std::vector<InputView> views;
};

// Bytes a call would need on its device (inputs + output + workspace), overflow-checked. Throws
// UsageError if it does not even fit in 64 bits.
size_t required_bytes(const OpSpec& spec, DType dtype);

// Note [Peak bytes of a call]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// What every memory check counts: the most one call holds at once on its device, not only its own
// tensors. Inputs are made in `given`; the kernel computes in `computed` (the autocast dtype for an op
// autocast casts, else `given`). Besides the inputs, output and workspace in `computed`:
// - when autocast casts, the given inputs stay alive beside their casts;
// - on the CPU a bf16/f16 computation widens its operands to f32 copies and makes an f32 output before
//   rounding it (Note [Half types on the CPU]): the call's tensors again in f32, and its workspace in f32.
// A bf16 matmul 2048 under --autocast peaks at twice what the f32 inputs alone suggest; counting only
// those let a run past the check be ended by the OOM killer. A view op (SpecCall::output_is_view) holds
// its inputs only: its output is a header over them, and it widens nothing. Used by trace, compare and
// sweep alike.
size_t peak_bytes(const OpSpec& spec, DType given, DType computed, const Device& device);

// Throws UsageError with the bytes needed and the bytes available when `bytes` will not fit.
void check_fits(size_t bytes, size_t available, const Device& device, const std::string& what);
// Host memory a run may use: MemAvailable from /proc/meminfo, or less where a cgroup limit binds (its
// usage less the page cache it can reclaim). `source` says which figure it is, for messages.
struct HostMemory {
  size_t bytes = 0;
  std::string source;
  std::string str() const;  // "23107 MiB available (MemAvailable in /proc/meminfo)", as `strata devices` says it
};
HostMemory host_memory();
size_t available_host_bytes();  // host_memory().bytes

// Sizes, checks, and creates the inputs (uniform in [-1, 1) from `seed`, never zeros). `computed`: the
// dtype the op computes in when autocast casts it (Note [Peak bytes of a call]); unset, `dtype`.
PreparedCall prepare_call(const OpSpec& spec, DType dtype, Device device, uint64_t seed, bool requires_grad,
                          size_t available_bytes, std::optional<DType> computed = std::nullopt);

// `strata trace --view NAME=KIND` (docs/views.md): the call's tensor argument NAME (a schema argument
// name: self, other, input, weight, ...) becomes a view of a new buffer of random values (from `seed`,
// never zeros), made once before any call: KIND `t` is the transpose of a buffer of the transposed shape
// (2-D arguments), `sliceN` (N >= 2) every N-th element of the last dim of a buffer N times wider. The
// views keep the argument's sizes; what the kernels then do with them (read a transposed operand as it
// is, or copy it with contiguous()) is what the trace shows. The description says which argument is
// which view. Throws UsageError naming the arguments and kinds allowed.
void apply_input_views(PreparedCall& call, const std::vector<std::string>& views, uint64_t seed, size_t available_bytes);
// One --view: the tensor `arg` (called `name` in messages) as a view of kind `kind` of a fresh buffer of
// random values from `seed`, returned in `base`; the view has arg's sizes, dtype and device. What
// apply_input_views does per argument, and a sequence's views per tensor (apply_sequence_views).
Tensor make_input_view(const Tensor& arg, const std::string& name, std::string_view kind, uint64_t seed,
                       size_t available_bytes, Tensor& base);

// A tensor of `shape` with values uniform in [-1, 1) from `seed`, created on the host and copied.
Tensor random_tensor(const Shape& shape, DType dtype, Device device, uint64_t seed);

// The float64 reference for a prepared call (layers/kernels/reference).
std::vector<double> reference_result(const OpSpec& spec, const PreparedCall& call);

// How many tensors the op's node saves for a call built from its spec (every optional input given).
size_t saved_by_node(const OpSpec& spec);
// Whether the op has a backward formula (the gradient ops have none).
bool differentiable(const OpSpec& spec);
// The float64 gradients of the call's arguments, by argument position, given the gradient of its output
// (reference::Grads: empty for ints and absent tensors). Throws UsageError for an op with no derivative.
reference::Grads reference_gradients(const OpSpec& spec, const PreparedCall& call, const Tensor& grad);

}  // namespace strata::frontend
