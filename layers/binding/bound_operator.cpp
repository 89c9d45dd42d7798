#include <array>
#include <string>

#include "layers/binding/binding.h"
#include "layers/dispatch/dispatch.h"
#include "lib/error.h"
#include "lib/zone.h"

namespace strata::binding {

const char* arg_type_name(ArgType type) {
  switch (type) {
    case ArgType::kTensor: return "Tensor";
    case ArgType::kOptionalTensor: return "Tensor?";
    case ArgType::kInt: return "int";
    case ArgType::kFloat: return "float";
    case ArgType::kBool: return "bool";
  }
  return "?";
}

std::string IValue::type_name() const {
  if (is_tensor()) return "Tensor";
  if (is_int()) return "int";
  if (is_double()) return "float";
  if (is_bool()) return "bool";
  return "None";
}

std::string IValue::repr() const {
  if (is_tensor()) return "Tensor" + tensor().str();
  if (is_int()) return std::to_string(to_int());
  if (is_double()) return std::to_string(to_double());
  if (is_bool()) return to_bool() ? "True" : "False";
  return "None";
}

namespace {

constexpr size_t kMaxArgs = 8;

bool accepts(ArgType type, const IValue& v) {
  switch (type) {
    case ArgType::kTensor: return v.is_tensor();
    case ArgType::kOptionalTensor: return v.is_tensor() || v.is_none();
    case ArgType::kInt: return v.is_int();
    case ArgType::kFloat: return v.is_double() || v.is_int();  // Python's int -> float promotion
    case ArgType::kBool: return v.is_bool();
  }
  return false;
}

[[noreturn]] void mismatch(const Schema& schema, const std::string& what) {
  throw UsageError(schema.name + "(): " + what + "\n  schema: " + schema.text);
}

}  // namespace

BoundOperator::BoundOperator(Schema schema, Invoke invoke) : schema_(std::move(schema)), invoke_(invoke) {
  // call() matches into a fixed array of kMaxArgs slots (no allocation per call): refuse here what
  // would overflow it there.
  if (schema_.arguments.size() > kMaxArgs) {
    throw Error("binding: " + schema_.name + " has more than " + std::to_string(kMaxArgs) +
                " arguments, the most a bound operator takes: " + schema_.text);
  }
}

IValue BoundOperator::call(std::span<const IValue> args, std::span<const Kwarg> kwargs) const {
  STRATA_ZONE(zone, Layer::kBinding, schema_.name.c_str());
  const auto& params = schema_.arguments;
  std::array<const IValue*, kMaxArgs> bound{};
  size_t positional = 0;
  for (const Argument& a : params) positional += a.keyword_only ? 0 : 1;
  if (args.size() > positional) {
    mismatch(schema_, "takes " + std::to_string(positional) + " positional argument" +
                          (positional == 1 ? "" : "s") + " but " + std::to_string(args.size()) +
                          (args.size() == 1 ? " was" : " were") + " given");
  }
  for (size_t i = 0; i < args.size(); ++i) bound[i] = &args[i];
  for (const Kwarg& kw : kwargs) {
    size_t i = 0;
    while (i < params.size() && params[i].name != kw.name) ++i;
    if (i == params.size()) mismatch(schema_, "got an unexpected keyword argument '" + std::string(kw.name) + "'");
    if (bound[i] != nullptr) mismatch(schema_, "got multiple values for argument '" + params[i].name + "'");
    bound[i] = &kw.value;
  }
  for (size_t i = 0; i < params.size(); ++i) {
    const Argument& p = params[i];
    if (bound[i] == nullptr) {
      if (!p.default_value) mismatch(schema_, "missing required argument '" + p.name + "' (position " + std::to_string(i + 1) + ")");
      bound[i] = &*p.default_value;
    }
    if (!accepts(p.type, *bound[i])) [[unlikely]] {
      mismatch(schema_, "argument '" + p.name + "' (position " + std::to_string(i + 1) + ") must be " +
                            arg_type_name(p.type) + ", not " + bound[i]->type_name());
    }
  }
  return invoke_(bound.data());
}

namespace {

const Tensor& opt_tensor(const IValue* v) {
  static const Tensor kNone;
  return v->is_tensor() ? v->tensor() : kNone;
}

// The typed calls, one per operator: this is where boxed values become C++ arguments.
IValue invoke(OpId op, const IValue* const* a) {
  switch (op) {
    case OpId::kMatmul: return ops::matmul(a[0]->tensor(), a[1]->tensor());
    case OpId::kLinear: return ops::linear(a[0]->tensor(), a[1]->tensor(), opt_tensor(a[2]));
    case OpId::kConv2d:
      return ops::conv2d(a[0]->tensor(), a[1]->tensor(), opt_tensor(a[2]), a[3]->to_int(), a[4]->to_int());
    case OpId::kRelu: return ops::relu(a[0]->tensor());
    case OpId::kAdd: return ops::add(a[0]->tensor(), a[1]->tensor(), a[2]->to_double());
    case OpId::kCount: break;
  }
  throw Error("binding: unknown operator id");
}

template <OpId Op>
IValue invoke_op(const IValue* const* a) {
  return invoke(Op, a);
}

constexpr BoundOperator::Invoke kInvokers[kNumOps] = {invoke_op<OpId::kMatmul>, invoke_op<OpId::kLinear>,
                                                      invoke_op<OpId::kConv2d>, invoke_op<OpId::kRelu>,
                                                      invoke_op<OpId::kAdd>};

const std::vector<BoundOperator>& registry() {
  static const std::vector<BoundOperator> ops = [] {
    std::vector<BoundOperator> out;
    for (const OperatorEntry& e : Dispatcher::instance().operators()) {
      out.emplace_back(parse_schema(e.schema()), kInvokers[static_cast<size_t>(e.id())]);
    }
    return out;
  }();
  return ops;
}

}  // namespace

const BoundOperator& find_operator(std::string_view name) {
  for (const BoundOperator& op : registry())
    if (op.schema().name == name) return op;
  std::string known;
  for (const BoundOperator& op : registry()) known += (known.empty() ? "" : ", ") + op.schema().name;
  throw UsageError("unknown operator '" + std::string(name) + "'; known operators: " + known);
}

std::vector<const BoundOperator*> all_operators() {
  std::vector<const BoundOperator*> out;
  for (const BoundOperator& op : registry()) out.push_back(&op);
  return out;
}

}  // namespace strata::binding
