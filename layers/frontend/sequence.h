// Sequences: a few ops in a row, each a real call through binding and dispatch, the output of one the
// input of the next. The first is `mlp BxIN[xHIDDEN...]xOUT`: Linear, then (ReLU, Linear) per hidden
// width, like a small model. Part of the frontend's public surface beside frontend.h (kept in its own
// header so that the single-op frontend does not grow with it); docs/sequences.md.
//
// Note [Sequences are not operators]: `mlp` is not in ops::AllOps. An operator is one schema, one kernel
// table and one backward node; a sequence is what a user's model does with several of them, so every
// step goes through find_operator(...).call() exactly as a single traced op does, with its own op id in
// the timeline (measure/harness.cpp), and the reports add the steps up (reports/model/sequence.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "layers/binding/binding.h"
#include "lib/device.h"
#include "lib/dtype.h"

namespace strata::frontend {

// What the user typed: "mlp 16x256x512x10" -> widths {256, 512, 10}, batch 16. A named program
// (programs.cpp: relu_matmul, linear_gelu) keeps its sizes in `sizes`, as its op spec parses them.
struct SequenceSpec {
  std::string name;             // "mlp", "relu_matmul"
  std::string text;             // "mlp 16x256x512x10", for messages
  int64_t batch = 0;            // B (mlp)
  std::vector<int64_t> widths;  // IN, HIDDEN..., OUT (mlp: at least two)
  std::vector<int64_t> sizes;   // a named program's: M,K,N (relu_matmul), B,IN,OUT (linear_gelu)
  size_t gemms = 0;             // GEMMs per forward: what the --check tolerance scales with
  size_t linears() const { return widths.size() - 1; }
  size_t steps() const { return 2 * linears() - 1; }  // a ReLU between consecutive Linears
};

// True for the names that are sequences rather than operators: "mlp" and the named programs.
bool is_sequence(std::string_view op);
// The named programs, "relu_matmul, linear_gelu" (programs.cpp): what --mode graph | compiled run besides mlp.
std::string program_names();
// The operators a sequence calls, each once, in the order of its first call: "pow, mul.Scalar, add, tanh,
// add.Scalar, mul" for gelu_tanh. Read from the steps of the sequence itself, made at the smallest size.
std::string sequence_operator_names(std::string_view op);
// The sequences' spec formats, for --help and for the unknown-op message (after spec_help()).
std::string sequence_help();
// Throws UsageError naming what was wrong: fewer than three sizes, more than kMaxMlpLayers Linears, and
// every size rule of parse_dims.
SequenceSpec parse_sequence_spec(std::string_view op, std::string_view dims);
inline constexpr size_t kMaxMlpLayers = 16;

struct SequenceStep {
  const binding::BoundOperator* op = nullptr;
  // The call's arguments. Those that are an earlier step's output are empty here: `from` names them,
  // (argument index, step), and Sequence::run_step puts the output there just before the call (mlp:
  // every step after the first reads the previous one's as argument 0).
  std::vector<binding::IValue> args;
  std::vector<std::pair<size_t, size_t>> from;
  std::string description;  // "linear [16x256] -> [16x512]"
  double flops = 0;
};

// One --view of a sequence's tensor (apply_sequence_views): `name` as --view typed it ("0.weight"), the
// view's kind ("t", "slice2") and the buffer the view reads.
struct SequenceView {
  std::string name;
  std::string kind;
  Tensor base;
};

struct Sequence {
  SequenceSpec spec;
  std::vector<SequenceStep> steps;
  Tensor input;                    // [B, IN]; never requires grad (a batch of data, not a parameter)
  std::vector<Tensor> parameters;  // weight and bias of each Linear, in order
  std::string description;         // "[16x256] -> linear 512 -> relu -> linear 10 -> [16x10]"
  std::vector<SequenceView> views;  // --view's, in the order given; `input`/`parameters` hold the views
  double flops = 0;                // of one forward
  size_t bytes = 0;                // what peak_bytes said: the memory check's figure
  // Per step: the last step that reads its output (kNoReader: none, as for the result), and the outputs
  // held for later steps while a forward runs. link_steps() sizes both from the steps' `from`.
  static constexpr size_t kNoReader = SIZE_MAX;
  std::vector<size_t> last_reader;
  std::vector<binding::IValue> outputs;
  void link_steps();

  // Step j on the earlier steps' outputs its `from` names. The one place where data flows from step to
  // step, so that eager, traced, replayed and compiled runs all do the same. `prev` (the previous step's
  // output, as the harness hands it on) is not needed: `outputs` holds what later steps read.
  binding::IValue run_step(size_t j, binding::IValue /*prev*/) {
    SequenceStep& s = steps[j];
    for (const auto& [arg, step] : s.from) s.args[arg] = outputs[step];
    binding::IValue out = s.op->call(s.args);
    // A step keeps no input alive between forwards, and an output lives until its last reader has run.
    for (const auto& [arg, step] : s.from) {
      s.args[arg] = binding::IValue();
      if (last_reader[step] == j) outputs[step] = binding::IValue();
    }
    if (last_reader[j] != kNoReader) outputs[j] = out;
    return out;
  }
  // One whole forward, untraced.
  binding::IValue forward() {
    binding::IValue x;
    for (size_t j = 0; j < steps.size(); ++j) x = run_step(j, std::move(x));
    return x;
  }
};

// Bytes one forward needs on the device: the input, every parameter and every step's output (all kept:
// with --requires-grad the Autograd key saves them for backward; without, this bounds it from above).
// Overflow-checked; throws UsageError past 2^63.
size_t required_bytes(const SequenceSpec& spec, DType dtype);

// The most one forward holds at once (Note [Peak bytes of a call]): the input and parameters in `given`,
// every activation in `computed` (the autocast dtype when the linears are cast), and on top the largest
// step's transient tensors: autocast's casts of its operands, and on the CPU the f32 copies a bf16/f16
// step widens its operands and output to.
size_t peak_bytes(const SequenceSpec& spec, DType given, DType computed, const Device& device);

// Checks the memory, then creates the input (uniform in [-1, 1)) and the parameters (uniform in
// [-1/sqrt(fan_in), 1/sqrt(fan_in)), as torch.nn.Linear initialises them, so that activations keep their
// scale through the layers) from `seed`. With `requires_grad` the parameters require grad, the input not.
// `computed`: the dtype the linears compute in under autocast; unset, `dtype`.
Sequence prepare_sequence(const SequenceSpec& spec, DType dtype, Device device, uint64_t seed, bool requires_grad,
                          size_t available_bytes, std::optional<DType> computed = std::nullopt);

// The float64 forward of the whole model, from host copies of the input and parameters
// (layers/kernels/reference, step by step in double precision).
std::vector<double> reference_result(const Sequence& sequence);

// The float64 gradients of sum(output) with respect to every parameter, in Sequence::parameters' order
// (weight, bias of each Linear): the reference of `trace mlp --backward --check`. Forward and backward
// in double precision from host copies (reference::linear_backward, reference::relu_backward).
std::vector<std::vector<double>> reference_parameter_gradients(const Sequence& sequence);
// Note [A sequence's tensor names]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// An mlp is nn.Sequential(Linear, ReLU, Linear, ...), so its parameters are named as that module's
// named_parameters() names them: the module's index in the Sequential (ReLUs count: 0, 2, 4, ...), a dot,
// `weight` or `bias`. A PyTorch user reads them in a state_dict and finds the same names here, in the
// gradient checks of --backward --check, in --view's error and in `strata trace --help`. The model's
// input is `input` (linear's argument name; it is data, not a parameter).
//
// "0.weight", "0.bias", "2.weight": parameter i's name in messages and reports.
std::string parameter_name(size_t index);
// The tensors --view can name in an mlp: "input", then every parameter_name in order.
std::vector<std::string> sequence_tensor_names(const SequenceSpec& spec);

// `strata trace mlp ... --view NAME=KIND` (docs/views.md): the tensor NAME (sequence_tensor_names)
// becomes a view of a fresh buffer of random values, made once before any call, as apply_input_views does
// for one op's argument; the step that reads it gets the view, and so do `input`/`parameters` (a
// parameter's view requires grad when the parameter did: the leaf whose .grad --backward fills). The
// description says which tensor is which view. Throws UsageError for a name that is not one of the
// sequence's tensors (naming them all, and the nearest), a name given twice, and a named program.
void apply_sequence_views(Sequence& sequence, const std::vector<std::string>& views, uint64_t seed,
                          size_t available_bytes);

// The tolerance of a whole forward's relative error: the per-dtype tolerance of one op times the number
// of Linears, since each GEMM adds its own rounding error to what it was given (to first order).
double sequence_tolerance(const SequenceSpec& spec, DType dtype, bool tf32);
// For the parameters' gradients: twice that, since a gradient passes back through as many GEMMs as the
// forward that fed it (each weight's gradient is one more GEMM of the two).
double sequence_gradient_tolerance(const SequenceSpec& spec, DType dtype, bool tf32);

}  // namespace strata::frontend
