// Every lowering in the lowering table (layers/compiler/lowering.h) against its eager kernel, bit for bit,
// on the values where a lowering written differently from its kernel shows: NaN, +-inf and signed zeros
// (relu written as `x > 0 ? x : 0` turned NaN and -0.0 into +0.0; a -0.0 scalar was written as the int
// `-0`, which is +0.0). The table is iterated, so a new row is held to the same rule with no edit here.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "layers/binding/binding.h"
#include "layers/compiler/compiler.h"
#include "layers/compiler/lowering.h"
#include "layers/ops/operators.h"
#include "tests/support/subprocess.h"

namespace strata {
namespace {

constexpr double kNan = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();
// The special values, and two ordinary ones so that every op also meets a plain finite operand.
const std::vector<double> kValues = {kNan, kInf, -kInf, 0.0, -0.0, 1.0, -2.0};

// Each tensor argument walks the values at its own rate, so two tensor arguments meet every pair.
Tensor special_tensor(size_t arg, DType dtype) {
  const int64_t n = int64_t(kValues.size() * kValues.size());
  Tensor t = Tensor::empty({n}, dtype, kCPU);
  for (int64_t i = 0; i < n; ++i) {
    const double v = kValues[size_t(arg == 0 ? i % int64_t(kValues.size()) : i / int64_t(kValues.size()))];
    if (dtype == DType::kF32) t.data<float>()[i] = float(v);
    else t.data<double>()[i] = v;
  }
  return t;
}

// The values a float argument takes: its default (alpha=1), the signed zeros, inf and NaN, and for pow's
// exponent each special exponent of the eager kernel.
std::vector<double> scalar_choices(const binding::Argument& a) {
  if (a.name == "exponent") return {0.0, -0.0, 1.0, 0.5, -0.5, -1.0, 2.0, 3.0, -2.0, 2.5};
  const double first = a.default_value ? a.default_value->to_double() : 0.5;
  return {first, -0.0, 0.0, -2.0, kInf, kNan};
}

double value_at(const Tensor& t, int64_t i) {
  return t.dtype() == DType::kF32 ? double(t.data<float>()[i]) : t.data<double>()[i];
}

// Whether the compiled result agrees with eager's: bit for bit (NaN == NaN, and the sign of a zero counts).
// The generated code calls the eager loops' own vector math at their width and fuses no multiply-add, as
// they do (Note [Vector math] in codegen.cpp), so nothing is allowed to round differently.
bool agrees(const Tensor& compiled, const Tensor& eager, int64_t i);

// The bits of a result, with every NaN one value (payloads and signs of NaN are not compared).
uint64_t bits_of(const Tensor& t, int64_t i) {
  const double v = t.dtype() == DType::kF32 ? double(t.data<float>()[i]) : t.data<double>()[i];
  if (std::isnan(v)) return ~uint64_t{0};
  uint64_t b = 0;
  std::memcpy(&b, &v, sizeof b);
  return b;
}

bool agrees(const Tensor& compiled, const Tensor& eager, int64_t i) { return bits_of(compiled, i) == bits_of(eager, i); }

struct Case {
  std::string op;
  std::vector<binding::IValue> args;  // the tensors as placeholders, replaced by the capture's inputs
  std::vector<size_t> tensor_slots;
  std::string scalars;                // for the failure message
};

std::vector<Case> cases_of(const std::string& op) {
  const binding::Schema& schema = binding::find_operator(op).schema();
  Case base{op, {}, {}, ""};
  std::vector<size_t> float_slots;
  for (size_t i = 0; i < schema.arguments.size(); ++i) {
    const binding::Argument& a = schema.arguments[i];
    if (a.type == binding::ArgType::kTensor) {
      base.tensor_slots.push_back(i);
      base.args.emplace_back();
    } else {
      REQUIRE_MESSAGE(a.type == binding::ArgType::kFloat, op, ": a lowered op with an argument of another type");
      float_slots.push_back(i);
      base.args.emplace_back(scalar_choices(a)[0]);
    }
  }
  std::vector<Case> cases = {base};
  // One scalar varied at a time, the others at their first choice.
  for (size_t slot : float_slots) {
    const std::vector<double> choices = scalar_choices(schema.arguments[slot]);
    for (size_t c = 1; c < choices.size(); ++c) {
      Case k = base;
      k.args[slot] = binding::IValue(choices[c]);
      cases.push_back(k);
    }
  }
  for (Case& k : cases)
    for (size_t slot : float_slots) k.scalars += schema.arguments[slot].name + "=" + std::to_string(k.args[slot].to_double()) + " ";
  return cases;
}

void check_case(const Case& k, DType dtype, const compiler::CompileOptions& options) {
  std::vector<Tensor> inputs;
  for (size_t i = 0; i < k.tensor_slots.size(); ++i) inputs.push_back(special_tensor(i, dtype));
  auto fn = [&k](const std::vector<Tensor>& in) {
    std::vector<binding::IValue> args = k.args;
    for (size_t i = 0; i < k.tensor_slots.size(); ++i) args[k.tensor_slots[i]] = binding::IValue(in[i]);
    const binding::Schema& schema = binding::find_operator(k.op).schema();
    std::vector<binding::IValue> positional;
    std::vector<binding::Kwarg> kwargs;
    for (size_t i = 0; i < args.size(); ++i) {
      if (schema.arguments[i].keyword_only) {
        kwargs.push_back({schema.arguments[i].name, args[i]});
      } else {
        positional.push_back(args[i]);
      }
    }
    binding::IValue out = binding::find_operator(k.op).call(positional, kwargs);
    return std::vector<Tensor>{out.tensor()};
  };
  const compiler::Captured captured = compiler::capture(fn, inputs);
  const compiler::CompiledGraph g = compiler::compile(captured, options);
  CAPTURE(k.op);
  CAPTURE(k.scalars);
  CAPTURE(dtype_name(dtype));
  REQUIRE(g.plan().kernels.size() == 1);
  REQUIRE(g.plan().kernels[0].kind == compiler::KernelKind::kPointwise);  // the lowering ran, not the op's kernel
  const Tensor compiled = g.run(inputs)[0];
  const Tensor& eager = captured.eager_outputs[0];
  int wrong = 0;
  for (int64_t i = 0; i < eager.numel(); ++i) {
    if (agrees(compiled, eager, i)) continue;
    if (++wrong > 3) continue;  // the first few are enough to see the pattern
    const size_t n = kValues.size();
    const double a = kValues[size_t(i) % n], b = kValues[size_t(i) / n];
    const double c = compiled.dtype() == DType::kF32 ? double(compiled.data<float>()[i]) : compiled.data<double>()[i];
    const double e = eager.dtype() == DType::kF32 ? double(eager.data<float>()[i]) : eager.data<double>()[i];
    FAIL_CHECK(k.op << "(" << a << (k.tensor_slots.size() > 1 ? ", " + std::to_string(b) : std::string()) << ") "
                    << k.scalars << ": compiled " << c << " (signbit " << std::signbit(c) << "), eager " << e
                    << " (signbit " << std::signbit(e) << ")");
  }
  CHECK(wrong == 0);
}

TEST_CASE("every lowering agrees with its eager kernel bit for bit on NaN, +-inf and signed zeros") {
  const test::TempDir dir;
  compiler::CompileOptions options;
  options.cache_dir = dir.path() + "/kernels";
  const std::vector<std::string> ops = compiler::lowering::pointwise_ops();
  CHECK(ops.size() >= 17);  // the table's rows and the functors' ops (relu among them)
  for (const std::string& op : ops) {
    const std::vector<Case> cases = cases_of(op);
    for (const Case& k : cases) check_case(k, DType::kF32, options);
    check_case(cases[0], DType::kF64, options);  // f64: the default scalars (the same code in double)
    if (cases.size() > 1) check_case(cases[1], DType::kF64, options);
  }
}

TEST_CASE("a lowering in a chain keeps NaN and -0.0: relu(mul(x, -0.0)) as eager") {
  const test::TempDir dir;
  compiler::CompileOptions options;
  options.cache_dir = dir.path() + "/kernels";
  const Tensor x = special_tensor(0, DType::kF32);
  auto fn = [](const std::vector<Tensor>& in) { return std::vector<Tensor>{ops::relu(ops::mul(in[0], -0.0))}; };
  const compiler::Captured captured = compiler::capture(fn, {x});
  const compiler::CompiledGraph g = compiler::compile(captured, options);
  REQUIRE(g.plan().kernels.size() == 1);
  const Tensor out = g.run({x})[0];
  for (int64_t i = 0; i < x.numel(); ++i) CHECK(bits_of(out, i) == bits_of(captured.eager_outputs[0], i));
  CHECK(std::isnan(out.data<float>()[0]));     // relu(NaN * -0) = NaN
  CHECK(std::signbit(out.data<float>()[5]));   // relu(1 * -0) = -0.0
}

}  // namespace
}  // namespace strata
