// The binding layer: the analogue of pybind11 / PyTorch's python_arg_parser. A caller hands over
// dynamic, boxed values (IValue); they are matched against the operator's schema (parsed once from the
// text the dispatcher registered), defaults are filled in, types are checked, and the typed C++ entry
// point in strata::ops is called. The result is boxed again. Every mismatch quotes the schema.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "lib/tensor.h"

namespace strata::binding {

class IValue {
 public:
  IValue() = default;  // None
  IValue(Tensor t) : value_(std::move(t)) {}
  IValue(int64_t i) : value_(i) {}
  IValue(int i) : value_(static_cast<int64_t>(i)) {}
  IValue(double d) : value_(d) {}
  IValue(bool b) : value_(b) {}
  IValue(DType d) : value_(d) {}  // a ScalarType argument (to_copy's dtype)
  IValue(Shape list) : value_(list) {}  // an int[] argument (view's size, permute's dims): at most 4 ints

  bool is_none() const { return std::holds_alternative<std::monostate>(value_); }
  bool is_tensor() const { return std::holds_alternative<Tensor>(value_); }
  bool is_int() const { return std::holds_alternative<int64_t>(value_); }
  bool is_double() const { return std::holds_alternative<double>(value_); }
  bool is_bool() const { return std::holds_alternative<bool>(value_); }
  bool is_dtype() const { return std::holds_alternative<DType>(value_); }
  bool is_int_list() const { return std::holds_alternative<Shape>(value_); }

  const Tensor& tensor() const { return std::get<Tensor>(value_); }
  Tensor&& take_tensor() && { return std::get<Tensor>(std::move(value_)); }  // a result handed on, not copied
  int64_t to_int() const { return std::get<int64_t>(value_); }
  double to_double() const { return is_int() ? static_cast<double>(std::get<int64_t>(value_)) : std::get<double>(value_); }
  bool to_bool() const { return std::get<bool>(value_); }
  DType to_dtype() const { return std::get<DType>(value_); }
  const Shape& to_int_list() const { return std::get<Shape>(value_); }

  std::string type_name() const;  // "Tensor", "int", "float", "bool", "ScalarType", "int[]", "None"
  std::string repr() const;       // "None", "3", "Tensor[2x3] f32 cpu", "[2, 3]"

 private:
  std::variant<std::monostate, Tensor, int64_t, double, bool, DType, Shape> value_;
};

// A boxed value as the C++ argument type T of an operator's Signature (const Tensor&, int64_t, double,
// bool, DType, std::optional<DType>, const Shape& for int[]), once it has been checked against the schema. A None given for a
// Tensor? is an undefined Tensor, for a ScalarType? an empty optional.
template <typename T>
decltype(auto) unbox(const IValue& v) {
  if constexpr (std::is_same_v<T, const Tensor&>) {
    static const Tensor kNone;
    return v.is_tensor() ? v.tensor() : kNone;
  } else if constexpr (std::is_same_v<T, int64_t>) {
    return v.to_int();
  } else if constexpr (std::is_same_v<T, double>) {
    return v.to_double();
  } else if constexpr (std::is_same_v<T, DType>) {
    return v.to_dtype();
  } else if constexpr (std::is_same_v<T, std::optional<DType>>) {
    return v.is_dtype() ? std::optional<DType>(v.to_dtype()) : std::nullopt;
  } else if constexpr (std::is_same_v<T, const Shape&>) {
    return v.to_int_list();
  } else {
    static_assert(std::is_same_v<T, bool>, "operator arguments are Tensor, int, float, bool or ScalarType");
    return v.to_bool();
  }
}

// kIntList is `int[]`: a list of at most Shape::kMaxDims ints (the dims strata's tensors can have), held
// as a Shape; no default (every view operator that takes one needs it). `int[N]` (conv2d's `int[2] stride=1`)
// is one with a size: a single int is taken for all N (the default too), as PyTorch's IntArrayRef[N] takes it.
enum class ArgType { kTensor, kOptionalTensor, kInt, kFloat, kBool, kScalarType, kOptionalScalarType, kIntList };
const char* arg_type_name(ArgType type);

struct Argument {
  std::string name;
  ArgType type = ArgType::kTensor;
  std::optional<IValue> default_value;
  bool keyword_only = false;
  int list_size = 0;    // N of an `int[N]` argument; 0 for `int[]` and every other type
  bool writes = false;  // an alias annotation with '!' ("Tensor(a!) self"): the op writes this tensor in place
};

struct Schema {
  std::string name;
  std::vector<Argument> arguments;
  std::string returns;
  std::string text;  // as registered, quoted in every error message
};

// Parses "name(Type arg[=default], ..., *, Type kwarg=default) -> Type". Throws Error naming the
// column and what was expected there.
Schema parse_schema(std::string_view text);

struct Kwarg {
  std::string_view name;
  IValue value;
};

class BoundOperator {
 public:
  using Invoke = IValue (*)(const IValue* const* args);
  using Reference = std::vector<double> (*)(const IValue* const* args);
  // Throws Error for a schema with more arguments than call() can match (8).
  static constexpr size_t kMaxArgs = 8;
  BoundOperator(Schema schema, Invoke invoke, Reference reference = nullptr);

  const Schema& schema() const { return schema_; }
  // Matches, converts and calls, inside a Binding-layer zone. Throws UsageError on a mismatch.
  IValue call(std::span<const IValue> args, std::span<const Kwarg> kwargs = {}) const;
  // The same arguments to the declaration's float64 reference (layers/kernels/reference): its values, in
  // the output's row-major order. What the Python tests check an operator against when they have no
  // reference of their own for it.
  std::vector<double> reference(std::span<const IValue> args, std::span<const Kwarg> kwargs = {}) const;

 private:
  class WidenedLists;  // the int[N] lists one call's ints stand for (bound_operator.cpp)
  std::array<const IValue*, kMaxArgs> bind(std::span<const IValue> args, std::span<const Kwarg> kwargs,
                                           WidenedLists& widened) const;

  Schema schema_;
  Invoke invoke_;
  Reference reference_;
};

// The operator named `name`, bound on first use. Throws UsageError listing the known operators.
const BoundOperator& find_operator(std::string_view name);
std::vector<const BoundOperator*> all_operators();

}  // namespace strata::binding
