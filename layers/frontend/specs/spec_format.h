// Note [An op's spec beside the frontend]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// The CLI's spec of an op ("matmul 1024", "conv 32x64x56x56 --kernel 3 --pad 1") is the frontend's
// business, not part of the op's contract (layers/ops: name, schema, kernels, reference, backward,
// autocast). OpSpecFormat<Op> gives, for one op:
//   kHelp (or help())   its line of `strata trace --help` and of the unknown-op message
//   call(dims, conv, typed)
//                       the call the typed sizes mean: it checks how many sizes the op takes (a UsageError
//                       naming the allowed forms), may normalise them in place (matmul's N becomes NxNxN),
//                       and returns the arguments in schema order, the output shape from the op's shape
//                       rule (lib/op_shapes.h), the report header's words, the FLOPs, the elements moved
//                       by a memory-bound op and any workspace the frontend must budget for
//   kReadsConvOptions   (optional) the spec reads --out-channels/--kernel/...; refused for other ops
// Each family's specialisations live in a header of their own here (gemm.h, conv.h, pointwise.h, views.h,
// gradients.h, reductions.h, copy.h, inplace.h), gathered by specs.h: code that reads an op's format
// includes specs.h, never this header alone, so that it always sees every specialisation (op_spec.cpp, and
// the tests that compare an op's help line or conv options with the frontend's).
//
// A functor op (one whose math is a functor of layers/kernels/pointwise_math.h, named by the functor's
// kName or kGradientName) needs no specialisation: the primary template below is its spec, made from its
// schema's arity (one tensor per argument, of the typed shape, one FLOP per element, memory-bound) and its
// functor's kFormula / kGradientFormula. So adding such an op touches no file here.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "layers/frontend/spec_call.h"
#include "layers/kernels/pointwise_math.h"
#include "layers/ops/operators.h"
#include "lib/error.h"
#include "lib/op_shapes.h"

namespace strata::frontend {

namespace spec_text {
inline std::string dims(const std::vector<int64_t>& d, size_t from, size_t to) {
  std::string s;
  for (size_t i = from; i < to; ++i) s += (i > from ? "x" : "") + std::to_string(d[i]);
  return s;
}
inline std::string bracket(const Shape& s) { return "[" + s.str() + "]"; }
// Elements as a double: a spec's product of sizes may not fit in int64 (the frontend refuses those,
// and computes bytes in 128 bits, before anything is allocated).
inline double elements(const std::vector<int64_t>& d) {
  double n = 1;
  for (int64_t x : d) n *= double(x);
  return n;
}
inline Shape shape(const std::vector<int64_t>& d) {
  Shape s;
  for (int64_t x : d) s[s.ndim++] = x;
  return s;
}
// `text` then spaces up to `width` (at least one): the columns of a help line.
inline std::string column(const std::string& text, size_t width) {
  return text + std::string(text.size() < width ? width - text.size() : 1, ' ');
}
}  // namespace spec_text

// The spec of a pointwise op over `tensors` inputs of the shape typed ("relu 1024", "add 32x32"): one
// operation per element, and memory-bound (each input read once, the output written once).
inline SpecCall pointwise_spec(const std::vector<int64_t>& d, int tensors, const char* joiner) {
  SpecCall c;
  const Shape s = spec_text::shape(d);
  for (int i = 0; i < tensors; ++i) {
    c.args.push_back(SpecArg::tensor(s));
    c.description += (i > 0 ? joiner : "") + spec_text::bracket(s);
  }
  c.outputs = {s};
  c.flops = spec_text::elements(d);
  c.elements_moved = double(tensors + 1) * spec_text::elements(d);
  return c;
}

// The spec of a pointwise op over one tensor and a Python float given as `value` (an int in the spec:
// SpecArg carries ints, and the binding layer takes an int for a float), with the op's other arguments
// at their defaults.
inline SpecCall scalar_spec(const std::vector<int64_t>& d, const char* joiner, int64_t value) {
  SpecCall c = pointwise_spec(d, 1, "");
  c.args.push_back(SpecArg::integer(value));
  c.description += joiner + std::to_string(value);
  return c;
}

// Refuses a shape of fewer than `low` or more than `high` sizes.
inline void view_spec_dims(const char* op, const std::vector<int64_t>& d, size_t low, size_t high, std::string_view typed) {
  if (d.size() < low || d.size() > high) {
    throw UsageError(std::string(op) + " takes a shape of " + std::to_string(low) + " to " + std::to_string(high) +
                     " sizes, got '" + std::string(typed) + "'");
  }
}

// The name of the op a functor of pointwise_math.h computes: its forward's, or its gradient op's.
template <bool IsGradient, typename Fn>
constexpr std::string_view functor_op_name() {
  if constexpr (IsGradient) {
    return Fn::kGradientName;
  } else {
    return Fn::kName;
  }
}
// The functor among Fns that computes Op (its forward when !IsGradient, its gradient op when IsGradient),
// or void.
template <typename Op, bool IsGradient, typename... Fns>
struct FunctorFor {
  using type = void;
};
template <typename Op, bool IsGradient, typename Fn, typename... Rest>
struct FunctorFor<Op, IsGradient, Fn, Rest...> {
  using type = std::conditional_t<functor_op_name<IsGradient, Fn>() == std::string_view(Op::kName), Fn,
                                  typename FunctorFor<Op, IsGradient, Rest...>::type>;
};
template <typename Op, bool IsGradient, typename List>
struct FunctorIn;
template <typename Op, bool IsGradient, typename... Fns>
struct FunctorIn<Op, IsGradient, kernels::math::MathList<Fns...>> {
  using type = typename FunctorFor<Op, IsGradient, Fns...>::type;
};
template <typename Op>
using ForwardFunctor = typename FunctorIn<Op, false, kernels::math::UnaryMath>::type;
template <typename Op>
using GradientFunctor = typename FunctorIn<Op, true, kernels::math::UnaryGradientMath>::type;

// How many arguments of a signature are tensors, and how many there are.
template <typename Signature>
struct Arity;
template <typename... Args>
struct Arity<Tensor(Args...)> {
  static constexpr size_t kTensors = (size_t{std::is_same_v<std::remove_cvref_t<Args>, Tensor>} + ... + 0);
  static constexpr size_t kAll = sizeof...(Args);
};

// The backward node of the op named `name` ("SiluBackward" for silu): what a gradient op's help line
// says it is the call of.
inline std::string backward_node_of(std::string_view name) {
  std::string node;
  ops::AllOps::for_each([&](auto op) {
    if (name == decltype(op)::kName) node = decltype(op)::kBackward.node;
  });
  return node;
}

// The spec of every op without a specialisation: a functor op's (Note [An op's spec beside the
// frontend]). Its inputs are tensors of the typed shape, as many as its schema has (the forward's one,
// the gradient op's grad and saved tensor); its help line is written from the functor's formula.
template <typename Op>
struct OpSpecFormat {
  using Forward = ForwardFunctor<Op>;
  using Gradient = GradientFunctor<Op>;
  static_assert(!std::is_void_v<Forward> || !std::is_void_v<Gradient>,
                "an op that is not a functor op of layers/kernels/pointwise_math.h needs an OpSpecFormat "
                "specialisation in its family's header under layers/frontend/specs/");
  static_assert(Arity<typename Op::Signature>::kTensors == Arity<typename Op::Signature>::kAll,
                "a functor op takes tensors only");
  static constexpr int kTensors = static_cast<int>(Arity<typename Op::Signature>::kTensors);

  static std::string help() {
    const std::string name = Op::kName;
    if constexpr (!std::is_void_v<Forward>) {
      return spec_text::column("  " + name + " N | shape", 27) +
             spec_text::column("N elements, " + std::string(Forward::kFormula), 44) + "e.g. " + name + " 1048576\n";
    } else {
      return spec_text::column("  " + name + " N", 27) + Gradient::kGradientFormula + " (" +
             backward_node_of(Gradient::kName) + "'s call)\n";
    }
  }
  // flops: one per element (a libm call such as exp or erf counts as one, as it did for relu and gelu).
  static SpecCall call(std::vector<int64_t>& d, const ConvOptions&, std::string_view) {
    return pointwise_spec(d, kTensors, ", ");
  }
};

// An op's help line, whether its format writes it (help()) or declares it (kHelp).
template <typename Op>
std::string help_line() {
  if constexpr (requires { OpSpecFormat<Op>::kHelp; }) {
    return OpSpecFormat<Op>::kHelp;
  } else {
    return OpSpecFormat<Op>::help();
  }
}

// Whether an op's spec reads the conv options; the frontend refuses those options for every other op.
template <typename Op>
inline constexpr bool kReadsConvOptions = requires { OpSpecFormat<Op>::kReadsConvOptions; };

}  // namespace strata::frontend
