// The binding layer: the analogue of pybind11 / PyTorch's python_arg_parser. A caller hands over
// dynamic, boxed values (IValue); they are matched against the operator's schema (parsed once from the
// text the dispatcher registered), defaults are filled in, types are checked, and the typed C++ entry
// point in strata::ops is called. The result is boxed again. Every mismatch quotes the schema.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <new>
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
  // A float? argument (rms_norm's eps): None or the number.
  IValue(std::optional<double> d) : value_(d ? decltype(value_)(*d) : decltype(value_)()) {}
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
// bool, DType, std::optional<DType>, std::optional<double> for float?, const Shape& for int[]), once it has been checked
// against the schema. A None given for a Tensor? is an undefined Tensor, for a ScalarType? or a float? an empty optional.
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
  } else if constexpr (std::is_same_v<T, std::optional<double>>) {
    return v.is_none() ? std::nullopt : std::optional<double>(v.to_double());
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
enum class ArgType {
  kTensor,
  kOptionalTensor,
  kInt,
  kFloat,
  kBool,
  kScalarType,
  kOptionalScalarType,
  kIntList,
  kOptionalFloat,  // float? (rms_norm's eps=None): None or a number
};
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

// Note [Binding touches little memory]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A call's binding runs right after the previous call's library work, which on a GPU (cuDNN's FFT_TILING
// under CUPTI: ~275 us of host code per conv) leaves little of strata's data in the caches: what binding
// costs there is mostly the cache lines it touches, not its instructions. An Argument is 224 bytes and an
// IValue 160, so reading each parameter's type and default from the schema and building kMaxArgs IValues
// for int[N] widening on every call touched ~2 lines per parameter plus 8-16 lines of stack, which is why
// conv2d (7 parameters) paid ~0.4 us more than matmul (2) for the same code on an H200 (docs/performance.md).
// So a call reads a packed copy of what it checks (ParamCheck, 8 bytes a parameter, one line for 8), the
// Argument only for a default or an error message, and builds an IValue only for an int that widens.
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
  // The lists that ints given for int[N] arguments stand for, built only for those (Note [Binding touches
  // little memory]); bind() returns pointers into it, so it lives in the caller's frame.
  class WidenedLists {
   public:
    WidenedLists() = default;
    WidenedLists(const WidenedLists&) = delete;
    WidenedLists& operator=(const WidenedLists&) = delete;
    ~WidenedLists() {
      for (size_t i = 0; i < count_; ++i) std::launder(reinterpret_cast<IValue*>(storage_[i]))->~IValue();
    }
    const IValue* add(const Shape& list) { return new (storage_[count_++]) IValue(list); }

   private:
    alignas(IValue) std::byte storage_[kMaxArgs][sizeof(IValue)];
    size_t count_ = 0;
  };

  // What bind() checks of one parameter on every call (Note [Binding touches little memory]).
  struct ParamCheck {
    ArgType type = ArgType::kTensor;
    uint8_t list_size = 0;  // Argument::list_size
    bool keyword_only = false;
    bool has_default = false;
  };
  std::array<const IValue*, kMaxArgs> bind(std::span<const IValue> args, std::span<const Kwarg> kwargs,
                                           WidenedLists& widened) const;

  Schema schema_;
  Invoke invoke_;
  Reference reference_;
  std::array<ParamCheck, kMaxArgs> checks_{};
  uint8_t params_ = 0;      // schema_.arguments.size()
  uint8_t positional_ = 0;  // the parameters before '*'
};

// The operator named `name`, bound on first use. Throws UsageError listing the known operators.
const BoundOperator& find_operator(std::string_view name);
std::vector<const BoundOperator*> all_operators();

}  // namespace strata::binding
