#include <array>
#include <string>
#include <utility>
#include <vector>

#include "layers/binding/binding.h"
#include "layers/ops/operators.h"
#include "lib/error.h"
#include "lib/nearest_name.h"
#include "lib/zone.h"

namespace strata::binding {

const char* arg_type_name(ArgType type) {
  switch (type) {
    case ArgType::kTensor: return "Tensor";
    case ArgType::kOptionalTensor: return "Tensor?";
    case ArgType::kInt: return "int";
    case ArgType::kFloat: return "float";
    case ArgType::kBool: return "bool";
    case ArgType::kScalarType: return "ScalarType";
    case ArgType::kOptionalScalarType: return "ScalarType?";
    case ArgType::kIntList: return "int[]";
    case ArgType::kOptionalFloat: return "float?";
  }
  return "?";
}

std::string IValue::type_name() const {
  if (is_tensor()) return "Tensor";
  if (is_int()) return "int";
  if (is_double()) return "float";
  if (is_bool()) return "bool";
  if (is_dtype()) return "ScalarType";
  if (is_int_list()) return "int[]";
  return "None";
}

std::string IValue::repr() const {
  if (is_tensor()) return "Tensor" + tensor().str();
  if (is_int()) return std::to_string(to_int());
  if (is_double()) return std::to_string(to_double());
  if (is_bool()) return to_bool() ? "True" : "False";
  if (is_dtype()) return std::string(dtype_name(to_dtype()));
  if (is_int_list()) {
    std::string out = "[";
    for (int i = 0; i < to_int_list().ndim; ++i) out += (i ? ", " : "") + std::to_string(to_int_list()[i]);
    return out + "]";
  }
  return "None";
}

namespace {

bool accepts(ArgType type, const IValue& v) {
  switch (type) {
    case ArgType::kTensor: return v.is_tensor();
    case ArgType::kOptionalTensor: return v.is_tensor() || v.is_none();
    case ArgType::kInt: return v.is_int();
    case ArgType::kFloat: return v.is_double() || v.is_int();  // Python's int -> float promotion
    case ArgType::kBool: return v.is_bool();
    case ArgType::kScalarType: return v.is_dtype();
    case ArgType::kOptionalScalarType: return v.is_dtype() || v.is_none();
    case ArgType::kIntList: return v.is_int_list();
    case ArgType::kOptionalFloat: return v.is_double() || v.is_int() || v.is_none();
  }
  return false;
}

[[noreturn]] void mismatch(const Schema& schema, const std::string& what) {
  throw UsageError(schema.name + "(): " + what + "\n  schema: " + schema.text);
}

}  // namespace

BoundOperator::BoundOperator(Schema schema, Invoke invoke, Reference reference)
    : schema_(std::move(schema)), invoke_(invoke), reference_(reference) {
  // call() matches into a fixed array of kMaxArgs slots (no allocation per call): refuse here what
  // would overflow it there.
  if (schema_.arguments.size() > kMaxArgs) {
    throw Error("binding: " + schema_.name + " has more than " + std::to_string(kMaxArgs) +
                " arguments, the most a bound operator takes: " + schema_.text);
  }
  params_ = static_cast<uint8_t>(schema_.arguments.size());
  for (size_t i = 0; i < params_; ++i) {
    const Argument& a = schema_.arguments[i];
    checks_[i] = ParamCheck{a.type, static_cast<uint8_t>(a.list_size), a.keyword_only, a.default_value.has_value()};
    positional_ += a.keyword_only ? 0 : 1;
  }
}

IValue BoundOperator::call(std::span<const IValue> args, std::span<const Kwarg> kwargs) const {
  STRATA_ZONE(zone, Layer::kBinding, schema_.name.c_str());
  WidenedLists widened;
  return invoke_(bind(args, kwargs, widened).data());
}

std::vector<double> BoundOperator::reference(std::span<const IValue> args, std::span<const Kwarg> kwargs) const {
  if (reference_ == nullptr) throw Error("binding: " + schema_.name + " was bound without its float64 reference");
  WidenedLists widened;
  return reference_(bind(args, kwargs, widened).data());
}

// Each parameter's value: the positional or keyword argument given for it, else its default. The lists that
// ints given for int[N] arguments stand for are made in `widened`, the caller's: the pointers returned point
// into it, so it must outlive the call they are passed to. Reads checks_, not the schema, unless a default
// or an error message needs it (Note [Binding touches little memory]).
std::array<const IValue*, BoundOperator::kMaxArgs> BoundOperator::bind(std::span<const IValue> args,
                                                                       std::span<const Kwarg> kwargs,
                                                                       WidenedLists& widened) const {
  const auto& params = schema_.arguments;
  std::array<const IValue*, kMaxArgs> bound{};
  if (args.size() > positional_) {
    mismatch(schema_, "takes " + std::to_string(positional_) + " positional argument" +
                          (positional_ == 1 ? "" : "s") + " but " + std::to_string(args.size()) +
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
  for (size_t i = 0; i < params_; ++i) {
    const ParamCheck& p = checks_[i];
    if (bound[i] == nullptr) {
      if (!p.has_default) mismatch(schema_, "missing required argument '" + params[i].name + "' (position " + std::to_string(i + 1) + ")");
      bound[i] = &*params[i].default_value;
    }
    // An int given for an `int[N]` argument stands for N copies of it (PyTorch's IntArrayRef[N] rule).
    if (p.type == ArgType::kIntList && p.list_size > 0 && bound[i]->is_int()) {
      Shape list;
      while (list.ndim < p.list_size) list[list.ndim++] = bound[i]->to_int();
      bound[i] = widened.add(list);
    }
    if (!accepts(p.type, *bound[i])) [[unlikely]] {
      mismatch(schema_, "argument '" + params[i].name + "' (position " + std::to_string(i + 1) + ") must be " +
                            (p.list_size > 0 ? "int or int[" + std::to_string(p.list_size) + "]" : arg_type_name(p.type)) +
                            ", not " + bound[i]->type_name());
    }
  }
  return bound;
}

namespace {

// Whether a schema argument's type is what the C++ argument type T receives.
template <typename T>
bool schema_type_matches(ArgType t) {
  if constexpr (std::is_same_v<T, const Tensor&>) return t == ArgType::kTensor || t == ArgType::kOptionalTensor;
  if constexpr (std::is_same_v<T, int64_t>) return t == ArgType::kInt;
  if constexpr (std::is_same_v<T, double>) return t == ArgType::kFloat;
  if constexpr (std::is_same_v<T, DType>) return t == ArgType::kScalarType;
  if constexpr (std::is_same_v<T, std::optional<DType>>) return t == ArgType::kOptionalScalarType;
  if constexpr (std::is_same_v<T, std::optional<double>>) return t == ArgType::kOptionalFloat;
  if constexpr (std::is_same_v<T, const Shape&>) return t == ArgType::kIntList;
  return t == ArgType::kBool;
}

// The typed call of one operator: where boxed values become C++ arguments.
template <typename Op, typename Signature = typename Op::Signature>
struct Invoke;
template <typename Op, typename... Args>
struct Invoke<Op, Tensor(Args...)> {
  // The declaration's schema and Signature must say the same thing; checked once, when the operator is
  // bound, so that a mistake in a new declaration is an error at the first call and in every test.
  static void check(const Schema& schema) {
    size_t i = 0;
    const bool same = schema.arguments.size() == sizeof...(Args) &&
                      (schema_type_matches<Args>(schema.arguments[i++].type) && ...);
    if (!same) throw Error(std::string("binding: the schema of ") + Op::kName + " does not match its C++ Signature: " + schema.text);
  }
  static IValue fn(const IValue* const* a) { return call(a, std::index_sequence_for<Args...>{}); }
  template <size_t... I>
  static IValue call(const IValue* const* a, std::index_sequence<I...>) {
    return ops::EntryPoint<Op>{}(unbox<Args>(*a[I])...);
  }
  static std::vector<double> reference(const IValue* const* a) {
    return reference_of(a, std::index_sequence_for<Args...>{});
  }
  template <size_t... I>
  static std::vector<double> reference_of(const IValue* const* a, std::index_sequence<I...>) {
    return Op::kReference(unbox<Args>(*a[I])...);
  }
};

const std::vector<BoundOperator>& registry() {
  static const std::vector<BoundOperator> kOperators = [] {
    std::vector<BoundOperator> out;
    ops::AllOps::for_each([&](auto op) {
      using Op = decltype(op);
      Schema schema = parse_schema(Op::kSchema);
      Invoke<Op>::check(schema);
      out.emplace_back(std::move(schema), &Invoke<Op>::fn, &Invoke<Op>::reference);
    });
    return out;
  }();
  return kOperators;
}

}  // namespace

const BoundOperator& find_operator(std::string_view name) {
  for (const BoundOperator& op : registry())
    if (op.schema().name == name) return op;
  std::string known;
  std::vector<std::string> names;
  for (const BoundOperator& op : registry()) {
    known += (known.empty() ? "" : ", ") + op.schema().name;
    names.push_back(op.schema().name);
  }
  const std::string nearest = nearest_name(name, names);
  throw UsageError("unknown operator '" + std::string(name) + "'" +
                   (nearest.empty() ? "; " : ": did you mean '" + nearest + "'? ") + "known operators: " + known);
}

std::vector<const BoundOperator*> all_operators() {
  std::vector<const BoundOperator*> out;
  for (const BoundOperator& op : registry()) out.push_back(&op);
  return out;
}

}  // namespace strata::binding
