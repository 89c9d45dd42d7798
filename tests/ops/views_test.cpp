// Views through the dispatcher (Note [Views through the dispatcher], docs/views.md): a view shares its
// input's Storage and moves no data; every kernel reads a strided, offset input as it reads its contiguous
// copy; which calls copy (a contiguous:CPU call in the timeline) and which do not; the GEMM reads a
// transposed view with a flag; reshape copies exactly when view cannot; bad dims, sizes and indices are
// refused with messages naming the shapes. Every view's values and gradients against float64 references
// and finite differences are in tests/ops/operators_test.cpp and tests/autograd/engine_test.cpp (generic
// over AllOps).
#include "lib/views.h"

#include <doctest/doctest.h>

#include <cstring>
#include <functional>
#include <string>
#include <type_traits>
#include <vector>

#include "layers/autograd/engine.h"
#include "layers/frontend/frontend.h"
#include "layers/kernels/reference/reference.h"
#include "layers/ops/operators.h"
#include "lib/error.h"
#include "tests/support/error_text.h"

using namespace strata;
using test::message_of;

namespace {

Tensor rnd(const Shape& s, uint64_t seed, DType dtype = DType::kF32) {
  return frontend::random_tensor(s, dtype, kCPU, seed);
}

// Writes t's values into `view` (same sizes), element by element through the view's strides.
void fill_view(const Tensor& view, const Tensor& t) {
  const size_t es = element_size(t.dtype());
  Shape idx;
  idx.ndim = t.dim();
  for (int64_t i = 0; i < t.numel(); ++i) {
    int64_t at = 0;
    for (int d = 0; d < idx.ndim; ++d) at += idx[d] * view.stride(d);
    std::memcpy(static_cast<char*>(view.data_ptr()) + at * int64_t(es),
                static_cast<const char*>(t.data_ptr()) + i * int64_t(es), es);
    for (int d = idx.ndim - 1; d >= 0 && ++idx[d] == t.size(d); --d) idx[d] = 0;
  }
}

enum class Layout { kStepped, kTransposed };

// A non-contiguous tensor with t's values: every second element of a wider buffer, from an offset of 1
// (kStepped), or the transpose of a buffer laid out with the last two dims swapped (kTransposed).
Tensor strided_copy_of(const Tensor& t, Layout layout) {
  Shape base_sizes = t.sizes();
  const int last = t.dim() - 1;
  Tensor view;
  if (layout == Layout::kStepped || t.dim() < 2) {
    base_sizes[last] = 2 * t.size(last) + 1;
    view = views::slice(Tensor::empty(base_sizes, t.dtype(), kCPU), last, 1, base_sizes[last], 2);
  } else {
    std::swap(base_sizes[last], base_sizes[last - 1]);
    view = views::transpose(Tensor::empty(base_sizes, t.dtype(), kCPU), last, last - 1);
  }
  REQUIRE(view.sizes() == t.sizes());
  fill_view(view, t);
  return view;
}

std::vector<std::string> dispatch_names(const Timeline& t) {
  std::vector<std::string> out;
  for (const Span& s : t.spans())
    if (s.layer == Layer::kDispatch) out.emplace_back(s.name);
  return out;
}
std::vector<std::string> library_names(const Timeline& t) {
  std::vector<std::string> out;
  for (const Span& s : t.spans())
    if (s.layer == Layer::kLibrary) out.emplace_back(s.name);
  return out;
}
bool has(const std::vector<std::string>& names, const std::string& name) {
  for (const std::string& n : names)
    if (n == name) return true;
  return false;
}

}  // namespace

TEST_CASE("a view shares its input's Storage, with its own sizes, strides and offset, and moves no data") {
  const Tensor x = rnd(Shape{4, 6}, 1);
  const Tensor t = ops::transpose(x, 0, 1);
  CHECK(t.storage() == x.storage());
  CHECK(t.data_ptr() == x.data_ptr());
  CHECK(t.sizes() == Shape{6, 4});
  CHECK(t.strides() == Shape{1, 6});
  CHECK_FALSE(t.is_contiguous());
  const Tensor s = ops::slice(x, 1, 1, 6, 2);  // columns 1, 3, 5
  CHECK(s.storage() == x.storage());
  CHECK(s.storage_offset() == 1);
  CHECK(s.strides() == Shape{6, 2});
  CHECK(reference::to_double(s)[1] == reference::to_double(x)[3]);
  const Tensor row = ops::select(x, 0, -1);
  CHECK(row.storage_offset() == 18);
  CHECK(row.sizes() == Shape{6});
  const Tensor e = ops::expand(ops::unsqueeze(ops::select(x, 1, 2), 1), Shape{4, 5});
  CHECK(e.strides() == Shape{6, 0});
  CHECK(e.storage_offset() == 2);
  CHECK(ops::permute(rnd(Shape{2, 3, 4}, 2), Shape{2, 0, 1}).strides() == Shape{1, 12, 4});
  // A view's Library zone is the header alone: no zone of a copy and no allocation.
#if STRATA_TRACING
  Timeline tl;
  {
    tracing::ActiveScope scope(&tl);
    static_cast<void>(ops::transpose(x, 0, 1));
  }
  CHECK(library_names(tl) == std::vector<std::string>{"transpose (view: strides swapped, no data moved)"});
#endif
}

TEST_CASE("every kernel reads stepped, offset and transposed inputs as it reads their contiguous copies") {
  size_t checked = 0;
  ops::AllOps::for_each([&](auto decl) {
    using Op = decltype(decl);
    CAPTURE(std::string(Op::kName));
    frontend::OpSpec spec;
    for (const char* dims : {"2x3x6x6", "5x7x3", "33"}) {
      try {
        spec = frontend::parse_op_spec(Op::kName, dims);
        break;
      } catch (const UsageError&) {
      }
    }
    REQUIRE(!spec.op.empty());
    for (DType dtype : {DType::kF32, DType::kF64, DType::kBF16}) {
      for (Layout layout : {Layout::kStepped, Layout::kTransposed}) {
        CAPTURE(dtype_name(dtype));
        CAPTURE(std::string(layout == Layout::kStepped ? "stepped" : "transposed"));
        const frontend::PreparedCall call =
            frontend::prepare_call(spec, dtype, kCPU, 3, false, frontend::available_host_bytes());
        std::vector<binding::IValue> strided;
        for (const binding::IValue& a : call.args) {
          strided.push_back(a.is_tensor() && a.tensor().dim() > 0
                                ? binding::IValue(strided_copy_of(a.tensor(), layout))
                                : a);
        }
        if (std::is_same_v<Op, ops::View>) {  // merging the last two dims of these needs a copy: refused
          CHECK_THROWS_AS(call.op->call(strided), UsageError);
          continue;
        }
        const binding::IValue out = call.op->call(strided);
        CHECK(reference::relative_error(out.tensor(), frontend::reference_result(spec, call)) <=
              reference::tolerance(dtype));
      }
    }
    ++checked;
  });
  CHECK(checked == ops::AllOps::kSize);
}

TEST_CASE("an expanded input (stride 0) through the pointwise, reduction and GEMM kernels") {
  const Tensor row = rnd(Shape{1, 5}, 4), full = rnd(Shape{3, 5}, 5);
  const Tensor e = ops::expand(row, Shape{3, 5});
  const Tensor copy = ops::contiguous(e);
  CHECK(copy.is_contiguous());
  CHECK(copy.storage() != row.storage());
  CHECK(reference::relative_error(ops::add(full, e, 1.0), reference::add(full, copy, 1.0)) <= 1e-6);
  CHECK(reference::relative_error(ops::sum(e), reference::sum(copy)) <= 1e-6);
  CHECK(reference::relative_error(ops::matmul(ops::t(e), full), reference::matmul(ops::t(copy), full)) <=
        1e-5);
}

#if STRATA_TRACING
TEST_CASE("which calls copy: a contiguous:CPU call for kernels that need contiguous memory, none for GEMM") {
  const Tensor x = rnd(Shape{8, 16}, 6), w = rnd(Shape{32, 16}, 7);
  auto traced = [](const std::function<void()>& f) {
    Timeline tl;
    {
      tracing::ActiveScope scope(&tl);
      f();
    }
    return tl;
  };
  // x @ w.t(): one GEMM with the transpose flag on w, no copy.
  Timeline tl = traced([&] { static_cast<void>(ops::matmul(x, ops::t(w))); });
  CHECK_FALSE(has(dispatch_names(tl), "contiguous:CPU"));
  CHECK(has(library_names(tl), "cblas_sgemm NT"));
  // linear with a transposed weight: the weight's flag flips (NN), still no copy.
  tl = traced([&] { static_cast<void>(ops::linear(x, ops::t(ops::t(w)), Tensor())); });
  CHECK_FALSE(has(dispatch_names(tl), "contiguous:CPU"));
  tl = traced([&] {
    static_cast<void>(ops::linear(x, ops::contiguous(ops::t(rnd(Shape{16, 32}, 8))), Tensor()));
  });
  CHECK(has(dispatch_names(tl), "CPU"));  // contiguous() of a transposed view is a real call
  // relu of a transposed view: the copy is its own call, below the outer op's CPU row.
  tl = traced([&] { static_cast<void>(ops::relu(ops::t(x))); });
  CHECK(has(dispatch_names(tl), "contiguous:CPU"));
  CHECK(has(library_names(tl), "strided copy (to contiguous)"));
  // relu of a contiguous tensor, and contiguous() of one: no copy, nothing allocated.
  tl = traced([&] { static_cast<void>(ops::relu(x)); });
  CHECK_FALSE(has(dispatch_names(tl), "contiguous:CPU"));
  Tensor same;
  tl = traced([&] { same = ops::contiguous(x); });
  CHECK(same.storage() == x.storage());
  CHECK(library_names(tl).empty());
  // A stepped (column) slice is still one GEMM operand (leading dimension 2x); a row step is not.
  const Tensor wide = rnd(Shape{16, 64}, 9);
  tl = traced([&] { static_cast<void>(ops::matmul(x, ops::narrow(wide, 1, 3, 32))); });
  CHECK_FALSE(has(dispatch_names(tl), "contiguous:CPU"));
  CHECK(has(library_names(tl), "cblas_sgemm NN"));
  tl = traced([&] { static_cast<void>(ops::matmul(x, ops::slice(wide, 1, 0, 64, 2))); });
  CHECK(has(dispatch_names(tl), "contiguous:CPU"));
}

TEST_CASE("reshape is a view when the strides allow one and a contiguous() copy otherwise - view refuses") {
  const Tensor x = rnd(Shape{4, 6}, 10);
  Timeline tl;
  Tensor r;
  {
    tracing::ActiveScope scope(&tl);
    r = ops::reshape(x, Shape{2, -1, 3});
  }
  CHECK(r.storage() == x.storage());
  CHECK(r.sizes() == Shape{2, 4, 3});
  CHECK_FALSE(has(dispatch_names(tl), "contiguous:CPU"));
  Timeline tl2;
  {
    tracing::ActiveScope scope(&tl2);
    r = ops::reshape(ops::t(x), Shape{24});
  }
  CHECK(r.storage() != x.storage());
  CHECK(has(dispatch_names(tl2), "contiguous:CPU"));
  CHECK(reference::relative_error(r, reference::to_double(ops::t(x))) == 0);
  // Merging dims a transpose keeps apart: view says a copy is needed and what to do.
  CHECK(message_of<UsageError>([&] {
          static_cast<void>(ops::view(ops::t(x), Shape{24}));
        }).find("needs a copy") != std::string::npos);
  // A view of a narrowed tensor whose rows stay whole: still a view.
  CHECK(ops::view(ops::narrow(x, 0, 1, 2), Shape{12}).storage() == x.storage());
}
#endif

TEST_CASE("backward through a chain of views reaches the leaf with the leaf's shape") {
  Tensor x = rnd(Shape{4, 6}, 11, DType::kF64);
  x.set_requires_grad(true);
  // y = relu(x.t()[1:5:2]).sum(): the gradient is the mask of the selected, transposed positions.
  const Tensor y = ops::sum(ops::relu(ops::slice(ops::t(x), 0, 1, 5, 2)));
  autograd::backward(y, Tensor());
  const Tensor g = x.grad();
  REQUIRE(g.defined());
  CHECK(g.sizes() == x.sizes());
  const auto xv = reference::to_double(x), gv = reference::to_double(g);
  for (int64_t r = 0; r < 4; ++r)
    for (int64_t c = 0; c < 6; ++c) {
      const bool picked = (c == 1 || c == 3);
      const auto i = static_cast<size_t>(r * 6 + c);
      CHECK(gv[i] == (picked && xv[i] > 0 ? 1.0 : 0.0));
    }
}

TEST_CASE("bad input: dims, indices and sizes out of range are refused with the tensor's shape") {
  const Tensor x = rnd(Shape{2, 3}, 12);
  auto refused = [](const std::function<void()>& f) { return message_of<UsageError>(f); };
  CHECK_THROWS_AS(ops::transpose(x, 0, 2), IndexRangeError);
  CHECK(refused([&] { ops::transpose(x, 0, 2); }) ==
        "transpose(): dim 2 is out of range for a tensor of size [2x3] (expected a dim in [-2, 1])");
  CHECK_THROWS_AS(ops::select(x, 1, 3), IndexRangeError);
  CHECK(refused([&] { ops::select(x, 1, -4); }) ==
        "select(): index -4 is out of range for dim 1 of size 3 (tensor of size [2x3])");
  CHECK(refused([&] {
          ops::view(x, Shape{4, 2});
        }) == "view(): shape (4, 2) is invalid for input of size 6 (tensor of size [2x3])");
  CHECK(refused([&] {
          ops::view(x, Shape{-1, -1});
        }) == "view(): shape (-1, -1) has more than one -1 (tensor of size [2x3])");
  CHECK(refused([&] {
          ops::expand(x, Shape{4, 3});
        }).find("cannot expand dim 0 of size 2 to 4") != std::string::npos);
  CHECK(refused([&] {
          ops::permute(x, Shape{0, 0});
        }) == "permute(): dims (0, 0) name dim 0 twice (tensor of size [2x3])");
  CHECK(refused([&] { ops::permute(x, Shape{0}); }).find("must name each of the 2 dims once") !=
        std::string::npos);
  CHECK(refused([&] { ops::narrow(x, 1, 2, 2); }).find("start 2 + length 2 exceeds dim 1 of size 3") !=
        std::string::npos);
  CHECK(refused([&] { ops::slice(x, 1, 0, 3, 0); }).find("step must be greater than zero, got 0") !=
        std::string::npos);
  CHECK(refused([&] {
          ops::t(rnd(Shape{2, 3, 4}, 13));
        }).find("at most 2 dimensions, got 3") != std::string::npos);
  CHECK(refused([&] {
          ops::unsqueeze(rnd(Shape{1, 2, 3, 4}, 14), 0);
        }).find("at most 4 dimensions") != std::string::npos);
  CHECK_THROWS_AS(ops::unsqueeze(x, 3), IndexRangeError);
  // Through the binding layer: a wrong argument type is named with the schema.
  const binding::BoundOperator& view = binding::find_operator("view");
  CHECK(refused([&] {
          view.call(std::vector<binding::IValue>{binding::IValue(x), binding::IValue(int64_t{6})});
        }).find("argument 'size' (position 2) must be int[], not int") != std::string::npos);
}

TEST_CASE("extreme sizes: a huge expanded view is refused when materialised, never a wrapped allocation") {
  // Note [One byte count]: an expanded view holds one element; a kernel that needs its elements laid out
  // (contiguous, the pointwise ops' outputs, sum's contiguous input) asks Tensor::empty for its bytes. f64
  // [2^61 + 2^10] is 2^64 + 2^13 bytes, which wrapped to 8 KiB; each op is refused before a byte is written.
  const Tensor one = rnd(Shape{1}, 31, DType::kF64);
  const Tensor huge = ops::expand(one, Shape{(int64_t{1} << 61) + 1024});
  CHECK(huge.numel() == (int64_t{1} << 61) + 1024);
  CHECK(huge.storage() == one.storage());  // still a view: nothing allocated yet
  CHECK_THROWS_AS(ops::contiguous(huge), UsageError);
  CHECK_THROWS_AS(ops::relu(huge), UsageError);
  CHECK_THROWS_AS(ops::mul(huge, 3.0), UsageError);
  CHECK_THROWS_AS(ops::add(huge, huge, 1.0), UsageError);
  CHECK_THROWS_AS(ops::sum(huge), UsageError);
  // A view whose element count passes int64 is refused by the view itself (torch's numel overflow check).
  const std::string refused = message_of<UsageError>([&] { ops::expand(rnd(Shape{1, 1}, 32), Shape{int64_t{1} << 62, 8}); });
  CHECK(refused.find("more elements than fit in 64 bits") != std::string::npos);
  // A view of a huge view that is small again reads the one element.
  const Tensor small = ops::narrow(huge, 0, (int64_t{1} << 61) - 5, 3);
  CHECK(small.numel() == 3);
  CHECK(reference::to_double(ops::contiguous(small)) == std::vector<double>(3, reference::to_double(one)[0]));
}

TEST_CASE("extreme arguments: narrow and slice compute their sizes without overflow, as torch's") {
  const Tensor x = rnd(Shape{4, 6}, 33);
  // start + length wrapped negative for a length near 2^63; refused as any length past the end is.
  for (const int64_t length : {INT64_MAX, INT64_MAX - 1, int64_t{1} << 62}) {
    const std::string refused = message_of<UsageError>([&] { ops::narrow(x, 0, 1, length); });
    CHECK(refused.find("exceeds dim 0 of size 4") != std::string::npos);
    CHECK(message_of<UsageError>([&] { ops::narrow(x, 1, -2, length); }).find("exceeds dim 1 of size 6") !=
          std::string::npos);
  }
  // A step past the size takes one element (torch: x[1::100] is [1, 6]); a step near 2^63 made
  // end - start + step - 1 wrap to a negative size.
  for (const int64_t step : {int64_t{7}, int64_t{100}, INT64_MAX - 2, INT64_MAX}) {
    const Tensor s = ops::slice(x, 0, 1, INT64_MAX, step);
    CHECK(s.sizes() == Shape{1, 6});
    CHECK(reference::to_double(ops::contiguous(s)) == reference::to_double(ops::contiguous(ops::select(x, 0, 1))));
    const Tensor c = ops::slice(x, 1, 2, 6, step);  // the last dim, whose stride is 1
    CHECK(c.sizes() == Shape{4, 1});
  }
  CHECK(ops::slice(x, 0, 4, INT64_MAX, INT64_MAX).sizes() == Shape{0, 6});  // past the end: empty
  CHECK(ops::slice(x, 0, 0, 4, 3).sizes() == Shape{2, 6});                 // rows 0 and 3
  // Backward through such a slice writes the one element's gradient back to row 1.
  Tensor leaf = rnd(Shape{4, 6}, 34);
  leaf.set_requires_grad(true);
  autograd::backward(ops::sum(ops::slice(leaf, 0, 1, INT64_MAX, INT64_MAX - 2)), Tensor());
  const std::vector<double> grad = reference::to_double(leaf.grad());
  for (size_t i = 0; i < grad.size(); ++i) CHECK(grad[i] == (i / 6 == 1 ? 1.0 : 0.0));
}
