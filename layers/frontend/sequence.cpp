// `mlp BxIN[xHIDDEN...]xOUT`: parsing, sizing, seeded parameters and the float64 forward. See
// Note [Sequences are not operators] in sequence.h.
#include "layers/frontend/sequence.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "layers/frontend/frontend.h"
#include "layers/frontend/programs.h"
#include "layers/kernels/reference/reference.h"
#include "lib/error.h"
#include "lib/nearest_name.h"
#include "lib/zone.h"

namespace strata::frontend {
namespace {

constexpr const char* kMlpFormat =
    "mlp takes BxINxOUT or BxINxHIDDEN[xHIDDEN...]xOUT: batch, input features, one width per hidden layer, "
    "output features";

std::string dims_text(std::initializer_list<int64_t> dims) {
  std::string s;
  for (int64_t d : dims) s += (s.empty() ? "" : "x") + std::to_string(d);
  return s;
}

Tensor host_f64(const Shape& shape, const std::vector<double>& values) {
  Tensor t = Tensor::empty(shape, DType::kF64, kCPU);
  for (size_t i = 0; i < values.size(); ++i) t.data<double>()[i] = values[i];
  return t;
}

}  // namespace

// Like random_tensor, with the values scaled by `scale` before they are rounded to `dtype`.
Tensor scaled_random(const Shape& shape, DType dtype, Device device, uint64_t seed, double scale) {
  Tensor host = Tensor::empty(shape, dtype, kCPU);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> dist(-1.0, 1.0);
  const int64_t n = host.numel();
  for (int64_t i = 0; i < n; ++i) {
    const double v = dist(rng) * scale;
    switch (dtype) {
      case DType::kF32: host.data<float>()[i] = static_cast<float>(v); break;
      case DType::kF64: host.data<double>()[i] = v; break;
      case DType::kF16: host.data<uint16_t>()[i] = reference::float_to_half(static_cast<float>(v)); break;
      case DType::kBF16: host.data<uint16_t>()[i] = reference::float_to_bf16(static_cast<float>(v)); break;
    }
  }
  return host.to(device);
}

void Sequence::link_steps() {
  last_reader.assign(steps.size(), kNoReader);
  for (size_t j = 0; j < steps.size(); ++j)
    for (const auto& [arg, step] : steps[j].from) last_reader[step] = j;
  outputs.assign(steps.size(), binding::IValue());
}

bool is_sequence(std::string_view op) { return op == "mlp" || is_program(op); }

std::string sequence_help() {
  return "  mlp BxIN[xHIDDEN...]xOUT  a small model: Linear, then ReLU + Linear per HIDDEN   e.g. mlp 16x256x512x10\n"
         "                           (a sequence of real calls, one op id each; trace and compare only)\n"
         "                           --view NAME=KIND names its tensors as nn.Sequential does: input, 0.weight,\n"
         "                           0.bias, 2.weight, ... (e.g. --view 0.weight=t: the weight stored [in,out])\n"
         "programs (mlp too: trace --mode eager|graph|compiled, and compare; docs/compiled.md):\n" +
         program_help();
}

SequenceSpec parse_sequence_spec(std::string_view op, std::string_view dims) {
  if (is_program(op)) return parse_program_spec(op, dims);
  if (!is_sequence(op)) throw UsageError("unknown sequence '" + std::string(op) + "'; sequences: mlp, " + program_names());
  SequenceSpec spec;
  spec.name = std::string(op);
  spec.text = spec.name + " " + std::string(dims);
  std::vector<int64_t> sizes;
  size_t start = 0;
  while (true) {
    const size_t end = dims.find('x', start);
    const std::string_view field = dims.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start);
    if (field.empty()) {
      throw UsageError(spec.text + ": size " + quote_typed(dims) + " has an empty field; " + kMlpFormat +
                       ", e.g. mlp 16x256x512x10");
    }
    try {
      sizes.push_back(parse_dims(field).front());  // one field: the size rules of every op spec
    } catch (const UsageError& e) {
      throw UsageError(spec.text + ": " + e.what());
    }
    if (end == std::string_view::npos) break;
    start = end + 1;
  }
  if (sizes.size() < 3) {
    throw UsageError(std::string(kMlpFormat) + ", e.g. mlp 16x256x512x10; got " + quote_typed(dims) + " (" +
                     std::to_string(sizes.size()) + " size" + (sizes.size() == 1 ? "" : "s") + ", at least 3 needed)");
  }
  if (sizes.size() - 2 > kMaxMlpLayers) {
    throw UsageError(spec.text + " has " + std::to_string(sizes.size() - 2) + " Linear layers; at most " +
                     std::to_string(kMaxMlpLayers) + " (a small model: one size per layer boundary)");
  }
  spec.batch = sizes.front();
  spec.widths.assign(sizes.begin() + 1, sizes.end());
  spec.gemms = spec.linears();
  return spec;
}

size_t required_bytes(const SequenceSpec& spec, DType dtype) {
  if (is_program(spec.name)) return program_bytes(spec, dtype, dtype, kCPU);
  // 128-bit sums of products of sizes below 2^31 each (see ByteCount in prepare.cpp): no wrap-around.
  using Wide = unsigned __int128;
  const Wide e = element_size(dtype), b = static_cast<Wide>(spec.batch);
  Wide total = b * static_cast<Wide>(spec.widths.front()) * e;  // the input
  for (size_t i = 0; i + 1 < spec.widths.size(); ++i) {
    const Wide in = static_cast<Wide>(spec.widths[i]), out = static_cast<Wide>(spec.widths[i + 1]);
    total += (out * in + out) * e;                                // weight and bias
    total += b * out * e * (i + 2 < spec.widths.size() ? 2 : 1);  // the Linear's output, and its ReLU's
  }
  if (total > static_cast<Wide>(INT64_MAX)) throw UsageError(spec.text + " would need more than 2^63 bytes; choose smaller sizes");
  return static_cast<size_t>(total);
}

size_t peak_bytes(const SequenceSpec& spec, DType given, DType computed, const Device& device) {
  if (is_program(spec.name)) return program_bytes(spec, given, computed, device);
  using Wide = unsigned __int128;  // sums of products of sizes below 2^31, as in required_bytes
  const Wide eg = element_size(given), ec = element_size(computed), b = static_cast<Wide>(spec.batch);
  const bool widened = device.is_cpu() && (computed == DType::kBF16 || computed == DType::kF16);
  Wide total = b * static_cast<Wide>(spec.widths.front()) * eg;  // the input
  Wide transient = 0;  // the largest step's, freed when the step returns
  for (size_t i = 0; i + 1 < spec.widths.size(); ++i) {
    const Wide in = static_cast<Wide>(spec.widths[i]), out = static_cast<Wide>(spec.widths[i + 1]);
    const bool relu = i + 2 < spec.widths.size();
    total += (out * in + out) * eg;                 // weight and bias
    total += b * out * ec * (relu ? 2 : 1);         // the Linear's output, and its ReLU's
    Wide step = 0;
    if (computed != given) step += ((i == 0 ? b * in : 0) + out * in + out) * ec;  // autocast's casts
    if (widened) step += (b * in + out * in + out + b * out) * 4;                  // f32 operands and output
    transient = std::max(transient, step);
    if (relu && widened) transient = std::max(transient, 2 * b * out * 4);
  }
  total += transient;
  if (total > static_cast<Wide>(INT64_MAX)) throw UsageError(spec.text + " would need more than 2^63 bytes; choose smaller sizes");
  return static_cast<size_t>(total);
}

std::string sequence_operator_names(std::string_view op) {
  // The smallest of each: mlp with one hidden layer has every kind of step an mlp has (linear, relu);
  // 1x1x1 is each program's op spec (matmul, linear, a shape).
  const std::string_view dims = op == "mlp" ? "1x1x1x1" : "1x1x1";
  const Sequence s = prepare_sequence(parse_sequence_spec(op, dims), DType::kF32, kCPU, 0, false, SIZE_MAX);
  std::vector<std::string> names;
  for (const SequenceStep& step : s.steps) {
    const std::string& name = step.op->schema().name;
    if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
  }
  std::string text;
  for (const std::string& name : names) text += (text.empty() ? "" : ", ") + name;
  return text;
}

Sequence prepare_sequence(const SequenceSpec& spec, DType dtype, Device device, uint64_t seed, bool requires_grad,
                          size_t available_bytes, std::optional<DType> computed) {
  if (is_program(spec.name)) return prepare_program(spec, dtype, device, seed, requires_grad, available_bytes);
  STRATA_ZONE(zone, Layer::kFrontend, "prepare model");
  Sequence s;
  s.spec = spec;
  const DType in = computed.value_or(dtype);
  s.bytes = peak_bytes(spec, dtype, in, device);  // Note [Peak bytes of a call]
  check_fits(s.bytes, available_bytes, device,
             spec.text + " (" + std::string(dtype_name(dtype)) + (in == dtype ? "" : " computed in " + std::string(dtype_name(in))) +
                 ", input, parameters, every activation and the largest step's temporaries)");
  // Seed streams as prepare_call numbers them: the input first, then each weight and bias in order.
  uint64_t stream = 0;
  s.input = scaled_random(Shape{spec.batch, spec.widths.front()}, dtype, device, seed * 1000003 + ++stream, 1.0);
  const binding::BoundOperator& linear = binding::find_operator("linear");
  const binding::BoundOperator& relu = binding::find_operator("relu");
  s.description = "[" + dims_text({spec.batch, spec.widths.front()}) + "]";
  for (size_t i = 0; i + 1 < spec.widths.size(); ++i) {
    const int64_t in = spec.widths[i], out = spec.widths[i + 1];
    const double bound = 1.0 / std::sqrt(double(in));
    Tensor weight = scaled_random(Shape{out, in}, dtype, device, seed * 1000003 + ++stream, bound);
    Tensor bias = scaled_random(Shape{out}, dtype, device, seed * 1000003 + ++stream, bound);
    weight.set_requires_grad(requires_grad);
    bias.set_requires_grad(requires_grad);
    s.parameters.push_back(weight);
    s.parameters.push_back(bias);
    // The op's own declaration sizes the step: flops and words as `strata trace linear` would give them.
    const OpSpec linear_spec = parse_op_spec("linear", dims_text({spec.batch, in, out}));
    SequenceStep step;
    step.op = &linear;
    step.args = {i == 0 ? binding::IValue(s.input) : binding::IValue(), binding::IValue(weight), binding::IValue(bias)};
    if (i > 0) step.from = {{0, s.steps.size() - 1}};
    step.description = "linear [" + dims_text({spec.batch, in}) + "] -> [" + dims_text({spec.batch, out}) + "]";
    step.flops = linear_spec.call.flops;
    s.steps.push_back(std::move(step));
    s.description += " -> linear " + std::to_string(out);
    if (i + 2 < spec.widths.size()) {
      const OpSpec relu_spec = parse_op_spec("relu", dims_text({spec.batch, out}));
      SequenceStep r;
      r.op = &relu;
      r.args = {binding::IValue()};
      r.from = {{0, s.steps.size() - 1}};
      r.description = "relu [" + dims_text({spec.batch, out}) + "]";
      r.flops = relu_spec.call.flops;
      s.steps.push_back(std::move(r));
      s.description += " -> relu";
    }
  }
  s.description += " -> [" + dims_text({spec.batch, spec.widths.back()}) + "]";
  for (const SequenceStep& step : s.steps) s.flops += step.flops;
  s.link_steps();
  return s;
}

std::vector<double> reference_result(const Sequence& sequence) {
  if (is_program(sequence.spec.name)) return program_reference(sequence);
  const SequenceSpec& spec = sequence.spec;
  Tensor x = host_f64(Shape{spec.batch, spec.widths.front()}, reference::to_double(sequence.input));
  for (size_t i = 0; i + 1 < spec.widths.size(); ++i) {
    const int64_t in = spec.widths[i], out = spec.widths[i + 1];
    const Tensor w = host_f64(Shape{out, in}, reference::to_double(sequence.parameters[2 * i]));
    const Tensor b = host_f64(Shape{out}, reference::to_double(sequence.parameters[2 * i + 1]));
    std::vector<double> y = reference::linear(x, w, b);
    if (i + 2 < spec.widths.size()) y = reference::relu(host_f64(Shape{spec.batch, out}, y));
    x = host_f64(Shape{spec.batch, out}, y);
  }
  return reference::to_double(x);
}

double sequence_tolerance(const SequenceSpec& spec, DType dtype, bool tf32) {
  return reference::tolerance(dtype, tf32) * double(std::max<size_t>(spec.gemms, 1));
}

double sequence_gradient_tolerance(const SequenceSpec& spec, DType dtype, bool tf32) {
  return 2 * sequence_tolerance(spec, dtype, tf32);
}

std::string parameter_name(size_t index) {
  // Linear i is module 2i of the Sequential (a ReLU between consecutive Linears): Note [A sequence's tensor names].
  return std::to_string(index - index % 2) + (index % 2 == 0 ? ".weight" : ".bias");
}

std::vector<std::string> sequence_tensor_names(const SequenceSpec& spec) {
  std::vector<std::string> names{"input"};
  for (size_t i = 0; i < 2 * spec.linears(); ++i) names.push_back(parameter_name(i));
  return names;
}

namespace {

std::string joined(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& name : names) out += (out.empty() ? "" : ", ") + name;
  return out;
}

// Which of the sequence's tensors --view's NAME is (an index into sequence_tensor_names), or a
// UsageError naming them all, and the nearest one when the name is a typo away from it.
size_t view_target(const Sequence& sequence, const std::string& typed, std::string_view name) {
  const std::vector<std::string> names = sequence_tensor_names(sequence.spec);
  const auto found = std::find(names.begin(), names.end(), name);
  if (found != names.end() && typed.find('=') != std::string::npos) return static_cast<size_t>(found - names.begin());
  const std::string nearest = found != names.end() ? "" : nearest_name(name, names);  // no '=': the name is right
  throw UsageError("--view " + quote_typed(typed) + ": expected NAME=KIND with NAME one of " + sequence.spec.text +
                   "'s tensors: " + joined(names) + " (the model's input, then the parameters as nn.Sequential's "
                   "named_parameters() names them) and KIND t or sliceN" +
                   (nearest.empty() ? "" : "; did you mean '" + nearest + "'?"));
}

}  // namespace

void apply_sequence_views(Sequence& sequence, const std::vector<std::string>& views, uint64_t seed,
                          size_t available_bytes) {
  if (views.empty()) return;
  if (is_program(sequence.spec.name)) {
    throw UsageError("--view names a tensor of mlp (input, 0.weight, ...); " + sequence.spec.name +
                     " is a named program whose tensors have no such names yet (trace one of its ops with --view)");
  }
  uint64_t stream = 0;  // after the op's own streams, as apply_input_views numbers its buffers
  for (const std::string& typed : views) {
    const size_t eq = typed.find('=');
    const std::string name = typed.substr(0, eq);
    const size_t target = view_target(sequence, typed, name);
    const std::string kind = typed.substr(eq + 1);
    for (const SequenceView& earlier : sequence.views) {
      if (earlier.name == name) {
        throw UsageError("--view " + name + " is given twice (" + earlier.kind + " and " + kind + "); give one view per tensor");
      }
    }
    // Tensor 0 is the input, read by the first Linear (step 0) as argument 0; parameter p is weight (p
    // even) or bias of Linear p/2, step p (a ReLU after every Linear but the last), argument 1 + p % 2.
    Tensor& slot = target == 0 ? sequence.input : sequence.parameters[target - 1];
    const size_t step = target == 0 ? 0 : target - 1 - (target - 1) % 2;
    const size_t arg = target == 0 ? 0 : 1 + (target - 1) % 2;
    Tensor base;
    Tensor view = make_input_view(slot, name, kind, seed * 1000003 + 1000 + ++stream, available_bytes, base);
    view.set_requires_grad(slot.requires_grad());
    sequence.steps[step].args[arg] = binding::IValue(view);
    sequence.description += "  (" + name + ": " + kind + " view, strides " + view.strides().str() + ")";
    sequence.views.push_back({name, kind, base});
    slot = std::move(view);
  }
}

std::vector<std::vector<double>> reference_parameter_gradients(const Sequence& sequence) {
  const SequenceSpec& spec = sequence.spec;
  const size_t layers = spec.linears();
  // Forward, keeping what the backward reads: each Linear's input and each ReLU's input.
  std::vector<Tensor> inputs, weights, biases, pre_relu;
  Tensor x = host_f64(Shape{spec.batch, spec.widths.front()}, reference::to_double(sequence.input));
  for (size_t i = 0; i < layers; ++i) {
    const int64_t in = spec.widths[i], out = spec.widths[i + 1];
    inputs.push_back(x);
    weights.push_back(host_f64(Shape{out, in}, reference::to_double(sequence.parameters[2 * i])));
    biases.push_back(host_f64(Shape{out}, reference::to_double(sequence.parameters[2 * i + 1])));
    const Tensor z = host_f64(Shape{spec.batch, out}, reference::linear(x, weights[i], biases[i]));
    if (i + 1 < layers) {
      pre_relu.push_back(z);
      x = host_f64(Shape{spec.batch, out}, reference::relu(z));
    }
  }
  // Backward from d sum(y) / dy = ones.
  std::vector<std::vector<double>> grads(2 * layers);
  Tensor g = host_f64(Shape{spec.batch, spec.widths.back()},
                      std::vector<double>(static_cast<size_t>(spec.batch * spec.widths.back()), 1.0));
  for (size_t i = layers; i-- > 0;) {
    const reference::Grads lg = reference::linear_backward(g, inputs[i], weights[i], biases[i]);
    grads[2 * i] = lg[1];
    grads[2 * i + 1] = lg[2];
    if (i == 0) break;
    const Tensor g_x = host_f64(inputs[i].sizes(), lg[0]);
    g = host_f64(inputs[i].sizes(), reference::relu_backward(g_x, pre_relu[i - 1])[0]);
  }
  return grads;
}

}  // namespace strata::frontend
