// Named programs (programs.h): parsing, sizing, seeded tensors and the float64 forward of each.
#include "layers/frontend/programs.h"

#include <cmath>

#include "layers/frontend/frontend.h"
#include "layers/kernels/reference/reference.h"
#include "lib/error.h"
#include "lib/zone.h"

namespace strata::frontend {
namespace {

struct Program {
  const char* name;
  const char* gemm;    // the op whose spec the sizes follow
  const char* format;  // for help and messages
  const char* what;
};
constexpr Program kPrograms[] = {
    {"relu_matmul", "matmul", "N or MxKxN", "relu(matmul(a, b))   e.g. relu_matmul 1024"},
    {"linear_gelu", "linear", "BxINxOUT", "gelu(linear(x, W, b))   e.g. linear_gelu 32x768x3072"},
    {"gelu_tanh", "tanh", "N (or a shape)", "the tanh GELU, 8 pointwise calls   e.g. gelu_tanh 1M"},
};

// sqrt(2/pi), the tanh GELU's constant, as PyTorch's gelu(approximate='tanh') writes it.
const double kSqrt2OverPi = std::sqrt(2.0 / M_PI);

const Program* find_program(std::string_view name) {
  for (const Program& p : kPrograms)
    if (name == p.name) return &p;
  return nullptr;
}

std::string dims_text(const std::vector<int64_t>& dims) {
  std::string s;
  for (int64_t d : dims) s += (s.empty() ? "" : "x") + std::to_string(d);
  return s;
}

Tensor host_f64(const Shape& shape, const std::vector<double>& values) {
  Tensor t = Tensor::empty(shape, DType::kF64, kCPU);
  for (size_t i = 0; i < values.size(); ++i) t.data<double>()[i] = values[i];
  return t;
}

// One step calling `op` on `args`, sized by the op's own declaration (flops as `strata trace op` gives them).
SequenceStep make_step(const char* op, const std::string& dims, std::vector<binding::IValue> args,
                       std::vector<std::pair<size_t, size_t>> from, std::string description) {
  SequenceStep step;
  step.op = &binding::find_operator(op);
  step.args = std::move(args);
  step.from = std::move(from);
  step.description = std::move(description);
  step.flops = parse_op_spec(op, dims).call.flops;
  return step;
}

// The tanh GELU as a user writes it eagerly with Python numbers, one call per operator:
// mul(mul(x, 0.5), add(tanh(mul(add(x, mul(pow(x, 3), 0.044715)), k)), 1)): x has three readers.
void add_gelu_tanh_steps(Sequence& s) {
  const std::string shape = dims_text(s.spec.sizes);
  const binding::IValue x(s.input);
  const binding::IValue none;
  auto step = [&](const char* op, std::vector<binding::IValue> args,
                  std::vector<std::pair<size_t, size_t>> from, const std::string& what) {
    s.steps.push_back(make_step(op, shape, std::move(args), std::move(from), what + " [" + shape + "]"));
  };
  step("pow", {x, 3.0}, {}, "pow x^3");                                // 0
  step("mul.Scalar", {none, 0.044715}, {{0, 0}}, "mul 0.044715*x^3");  // 1
  step("add", {x, none}, {{1, 1}}, "add x + ...");                     // 2 (alpha keyword-only, 1 by default)
  step("mul.Scalar", {none, kSqrt2OverPi}, {{0, 2}}, "mul sqrt(2/pi)*(...)");  // 3
  step("tanh", {none}, {{0, 3}}, "tanh");                                      // 4
  step("add.Scalar", {none, 1.0, 1.0}, {{0, 4}}, "add 1 + tanh(...)");         // 5
  step("mul.Scalar", {x, 0.5}, {}, "mul 0.5*x");                               // 6
  step("mul", {none, none}, {{0, 6}, {1, 5}}, "mul 0.5*x * (...)");            // 7
  s.description = "0.5*x*(1+tanh(sqrt(2/pi)*(x+0.044715*x^3))) over [" + shape + "], 8 calls";
}

}  // namespace

bool is_program(std::string_view name) { return find_program(name) != nullptr; }

std::string program_names() {
  std::string s;
  for (const Program& p : kPrograms) s += (s.empty() ? "" : ", ") + std::string(p.name);
  return s;
}

std::string program_help() {
  std::string s;
  for (const Program& p : kPrograms) {
    std::string head = "  " + std::string(p.name) + " " + p.format;
    head.resize(std::max<size_t>(head.size() + 1, 29), ' ');
    s += head + p.what + "\n";
  }
  return s;
}

SequenceSpec parse_program_spec(std::string_view name, std::string_view dims) {
  const Program* program = find_program(name);
  if (program == nullptr)
    throw UsageError("unknown program '" + std::string(name) + "'; programs: " + program_names());
  SequenceSpec spec;
  spec.name = program->name;
  spec.text = spec.name + " " + std::string(dims);
  try {
    spec.sizes = parse_op_spec(program->gemm, dims).dims;
  } catch (const UsageError& e) {
    throw UsageError(spec.name + " takes " + program->format + " (the sizes of its " + program->gemm + "); " +
                     e.what());
  }
  if (spec.name == "relu_matmul" && spec.sizes.size() == 1)
    spec.sizes = {spec.sizes[0], spec.sizes[0], spec.sizes[0]};
  spec.gemms = spec.name == "gelu_tanh" ? 0 : 1;
  return spec;
}

size_t program_bytes(const SequenceSpec& spec, DType given, DType computed, const Device& device) {
  using Wide = unsigned __int128;  // sums of products of sizes below 2^31: no wrap-around
  if (spec.name == "gelu_tanh") {
    // The input and eight outputs at most (each intermediate goes once read: a bound from above), and
    // on the CPU a bf16/f16 step's f32 copies of two operands and its output.
    Wide n = 1;
    for (int64_t d : spec.sizes) n *= static_cast<Wide>(d);
    Wide total = n * element_size(given) + 8 * n * element_size(computed);
    if (device.is_cpu() && (computed == DType::kBF16 || computed == DType::kF16)) total += 3 * n * 4;
    if (total > static_cast<Wide>(INT64_MAX))
      throw UsageError(spec.text + " would need more than 2^63 bytes; choose smaller sizes");
    return static_cast<size_t>(total);
  }
  const Wide a = static_cast<Wide>(spec.sizes[0]), k = static_cast<Wide>(spec.sizes[1]),
             n = static_cast<Wide>(spec.sizes[2]);
  const Wide eg = element_size(given), ec = element_size(computed);
  // relu_matmul: a [M,K], b [K,N]; linear_gelu: x [B,IN], W [OUT,IN], b [OUT]. Two outputs of [M,N].
  const Wide operands = a * k + k * n + (spec.name == "linear_gelu" ? n : 0);
  Wide total = operands * eg + 2 * a * n * ec;
  if (device.is_cpu() && (computed == DType::kBF16 || computed == DType::kF16))
    total += (operands + a * n) * 4;
  if (total > static_cast<Wide>(INT64_MAX))
    throw UsageError(spec.text + " would need more than 2^63 bytes; choose smaller sizes");
  return static_cast<size_t>(total);
}

Sequence prepare_program(const SequenceSpec& spec, DType dtype, Device device, uint64_t seed,
                         bool requires_grad, size_t available_bytes) {
  STRATA_ZONE(zone, Layer::kFrontend, "prepare program");
  Sequence s;
  s.spec = spec;
  s.bytes = program_bytes(spec, dtype, dtype, device);
  check_fits(
      s.bytes, available_bytes, device,
      spec.text + " (" + std::string(dtype_name(dtype)) + ", inputs, parameters and every step's output)");
  if (spec.name == "gelu_tanh") {
    Shape shape;
    for (int64_t d : spec.sizes) shape.dims[static_cast<size_t>(shape.ndim++)] = d;
    s.input =
        scaled_random(shape, dtype, device, seed * 1000003 + 1, 1.0);  // stream 1, as an op's first input
    add_gelu_tanh_steps(s);
    for (const SequenceStep& step : s.steps) s.flops += step.flops;
    s.link_steps();
    return s;
  }
  const int64_t m = spec.sizes[0], k = spec.sizes[1], n = spec.sizes[2];
  const std::string out = dims_text({m, n});
  // Seed streams as prepare_call numbers them: the input first, then each parameter in order.
  uint64_t stream = 0;
  s.input = scaled_random(Shape{m, k}, dtype, device, seed * 1000003 + ++stream, 1.0);
  if (spec.name == "relu_matmul") {
    // b is the GEMM's other operand: a parameter (a weight the function closed over), as in a model.
    Tensor b = scaled_random(Shape{k, n}, dtype, device, seed * 1000003 + ++stream, 1.0);
    b.set_requires_grad(requires_grad);
    s.parameters = {b};
    s.steps.push_back(make_step("matmul", dims_text(spec.sizes),
                                {binding::IValue(s.input), binding::IValue(b)}, {},
                                "matmul [" + dims_text({m, k}) + "] @ [" + dims_text({k, n}) + "]"));
    s.steps.push_back(make_step("relu", out, {binding::IValue()}, {{0, 0}}, "relu [" + out + "]"));
    s.description =
        "relu(matmul([" + dims_text({m, k}) + "] @ [" + dims_text({k, n}) + "])) -> [" + out + "]";
  } else {  // linear_gelu, its parameters initialised as torch.nn.Linear's (sequence.h)
    const double bound = 1.0 / std::sqrt(double(k));
    Tensor w = scaled_random(Shape{n, k}, dtype, device, seed * 1000003 + ++stream, bound);
    Tensor b = scaled_random(Shape{n}, dtype, device, seed * 1000003 + ++stream, bound);
    w.set_requires_grad(requires_grad);
    b.set_requires_grad(requires_grad);
    s.parameters = {w, b};
    s.steps.push_back(make_step("linear", dims_text(spec.sizes),
                                {binding::IValue(s.input), binding::IValue(w), binding::IValue(b)}, {},
                                "linear [" + dims_text({m, k}) + "] -> [" + out + "]"));
    s.steps.push_back(make_step("gelu", out, {binding::IValue()}, {{0, 0}}, "gelu [" + out + "]"));
    s.description = "gelu(linear([" + dims_text({m, k}) + "], W [" + dims_text({n, k}) + "], b [" +
                    std::to_string(n) + "])) -> [" + out + "]";
  }
  for (const SequenceStep& step : s.steps) s.flops += step.flops;
  s.link_steps();
  return s;
}

std::vector<double> program_reference(const Sequence& s) {
  if (s.spec.name == "gelu_tanh") {
    std::vector<double> y = reference::to_double(s.input);
    for (double& v : y) v = 0.5 * v * (1.0 + std::tanh(kSqrt2OverPi * (v + 0.044715 * v * v * v)));
    return y;
  }
  const int64_t m = s.spec.sizes[0], k = s.spec.sizes[1], n = s.spec.sizes[2];
  const Tensor x = host_f64(Shape{m, k}, reference::to_double(s.input));
  if (s.spec.name == "relu_matmul") {
    const Tensor b = host_f64(Shape{k, n}, reference::to_double(s.parameters[0]));
    return reference::relu(host_f64(Shape{m, n}, reference::matmul(x, b)));
  }
  const Tensor w = host_f64(Shape{n, k}, reference::to_double(s.parameters[0]));
  const Tensor b = host_f64(Shape{n}, reference::to_double(s.parameters[1]));
  return reference::gelu(host_f64(Shape{m, n}, reference::linear(x, w, b)));
}

}  // namespace strata::frontend
