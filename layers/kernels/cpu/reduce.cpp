// sum.dim_IntList, mean.dim and mean on the CPU: one loop over the contiguous input in row-major order,
// each element added to its output's double accumulator (the reduced dims have stride 0 in the output),
// as sum and sum_to accumulate: a long sum in f32 would lose digits the float64 reference keeps. The
// row sums and column accumulations are vectorized/loops.cpp's; the work is split across the intra-op
// threads where the outputs split (Note [Threads in a reduction over dims]).
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "layers/kernels/cpu/cpu_common.h"
#include "layers/kernels/cpu/cpu_kernels.h"
#include "layers/kernels/cpu/sum_rows.h"
#include "layers/kernels/cpu/vectorized/loops.h"
#include "lib/op_shapes.h"
#include "lib/parallel.h"
#include "lib/zone.h"

namespace strata::kernels::cpu {
namespace {

// Note [Threads in a reduction over dims]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Threads never share an accumulator, so no result depends on the thread count:
//  - the reduced dims are the trailing ones (x.sum(-1), x.sum((1, 2)), x.mean() over every dim): each
//    output is the sum of one contiguous row, summed in fixed blocks as sum is (sum_rows.h; Note [Sums that
//    do not depend on the thread count]), the blocks of every row split across the threads;
//  - the last dim kept (x.sum(0) of a matrix): each thread takes a slice of the columns for every row;
//  - anything else (reduced dims between kept ones, x.sum((0, 2))): the input is first copied with the
//    kept dims outermost (the threaded strided copy, as TensorIterator reorders dims), then summed as
//    trailing dims are.
// The order of additions into one accumulator is the same in every case as on one thread.
template <typename T>
int accumulate(const T* __restrict x, const Shape& s, const Shape& out_strides, double* __restrict acc) {
  if (s.ndim == 0) {
    acc[0] += double(x[0]);
    return 1;
  }
  // The reduced dims (output stride 0; a dim of size 1 goes either way) a trailing run: contiguous rows.
  int first_reduced = s.ndim;
  while (first_reduced > 0 && (out_strides[first_reduced - 1] == 0 || s[first_reduced - 1] == 1)) --first_reduced;
  bool leading_kept = true;
  for (int i = 0; i < first_reduced; ++i) leading_kept = leading_kept && (out_strides[i] != 0 || s[i] == 1);
  if (leading_kept && first_reduced < s.ndim) {
    int64_t rows = 1, inner = 1;
    for (int i = 0; i < first_reduced; ++i) rows *= s[i];
    for (int i = first_reduced; i < s.ndim; ++i) inner *= s[i];
    return sum_rows(x, rows, inner, acc);
  }
  // Otherwise the last dim is kept (needs_reorder sent the rest through a reordering copy): every row is
  // added into its outputs, one slice of the columns per thread.
  const auto& loops = vectorized::loops().of<T>();
  const int last = s.ndim - 1;
  const int64_t inner = s[last];
  int64_t rows = 1;
  for (int i = 0; i < last; ++i) rows *= s[i];
  if (inner == 0 || rows == 0) return 1;
  auto rows_in_order = [&](int64_t col_begin, int64_t col_end) {
    Shape idx;
    idx.ndim = last;
    for (int64_t r = 0; r < rows; ++r) {
      int64_t at = 0;
      for (int i = 0; i < last; ++i) at += idx[i] * out_strides[i];
      loops.accumulate(x + r * inner + col_begin, acc + at + col_begin, col_end - col_begin);
      for (int i = last - 1; i >= 0 && ++idx[i] == s[i]; --i) idx[i] = 0;  // the next row, row-major
    }
  };
  const int64_t grain = std::max<int64_t>(16, parallel::kGrainSize / rows);  // columns, each read `rows` times
  const int threads = parallel::threads_for(0, inner, grain);
  parallel::parallel_for(0, inner, grain, rows_in_order);
  return threads;
}

// Whether the last dim is reduced with others that do not all follow every kept dim (x.sum((0, 2)) of a
// 3-D tensor): the case neither the row sums nor the column loop of accumulate() can take.
bool needs_reorder(const Shape& s, const Shape& out_strides) {
  int last_kept = -1, first_reduced = s.ndim;
  for (int i = 0; i < s.ndim; ++i) {
    if (s[i] == 1) continue;  // either way
    if (out_strides[i] == 0) first_reduced = std::min(first_reduced, i);
    else last_kept = i;
  }
  if (first_reduced == s.ndim || last_kept < first_reduced) return false;  // nothing reduced, or trailing
  return out_strides[s.ndim - 1] == 0;                                    // the last dim reduced, not trailing
}

// A contiguous copy of x with its kept dims first (in order), then its reduced ones: each output's
// elements one contiguous row, rows in the output's order.
Tensor kept_dims_outermost(const Tensor& x, const Shape& out_strides) {
  const Shape& s = x.sizes();
  Shape sizes, strides;
  sizes.ndim = strides.ndim = s.ndim;
  int at = 0;
  for (int pass = 0; pass < 2; ++pass) {
    for (int i = 0; i < s.ndim; ++i) {
      const bool reduced = out_strides[i] == 0 && s[i] != 1;
      if (reduced != (pass == 1)) continue;
      sizes[at] = s[i];
      strides[at] = x.stride(i);
      ++at;
    }
  }
  Tensor out = Tensor::empty(sizes, x.dtype(), x.device());
  strided_copy(out, x.as_strided(sizes, strides, x.storage_offset()));
  return out;
}

Tensor reduce(const char* op, const Tensor& self, const Shape& dim, bool keepdim, std::optional<DType> dtype,
              bool mean) {
  const DType out_dtype = dtype.value_or(self.dtype());
  // Half types: read through an f32 copy, written through one (Note [Half types on the CPU]).
  if (is_half(self.dtype())) return reduce(op, widen_to_f32(self), dim, keepdim, out_dtype, mean);
  if (is_half(out_dtype)) return round_from_f32(reduce(op, self, dim, keepdim, DType::kF32, mean), out_dtype);
  check_cpu_input(op, self);
  const op_shapes::Reduction r = op_shapes::reduce_dims(op, self.sizes(), dim, keepdim);
  const char* base = mean ? "mean (loop, f64 accumulator)" : "sum (loop, f64 accumulator)";
  STRATA_ZONE(zone, Layer::kLibrary, base);
  const Shape& s = self.sizes();
  Shape out_strides;
  out_strides.ndim = s.ndim;
  int64_t stride = 1;
  for (int i = s.ndim - 1; i >= 0; --i) {
    out_strides[i] = r.reduced[static_cast<size_t>(i)] ? 0 : stride;
    stride *= r.kept[i];
  }
  std::vector<double> acc(static_cast<size_t>(r.out.numel()), 0.0);
  int threads = 1;
  if (needs_reorder(s, out_strides)) {
    const Tensor kept_first = kept_dims_outermost(self, out_strides);
    threads = self.dtype() == DType::kF32 ? sum_rows(kept_first.data<float>(), r.out.numel(), r.count, acc.data())
                                          : sum_rows(kept_first.data<double>(), r.out.numel(), r.count, acc.data());
  } else {
    threads = self.dtype() == DType::kF32 ? accumulate(self.data<float>(), s, out_strides, acc.data())
                                          : accumulate(self.data<double>(), s, out_strides, acc.data());
  }
  zone.rename(ran_name(base, nullptr, threads));
  // mean of nothing is 0/0 = NaN, as torch's
  if (mean) {
    for (double& a : acc) a /= double(r.count);
  }
  Tensor out = Tensor::empty(r.out, out_dtype, self.device());
  if (out_dtype == DType::kF32) {
    std::transform(acc.begin(), acc.end(), out.data<float>(), [](double a) { return static_cast<float>(a); });
  } else {
    std::copy(acc.begin(), acc.end(), out.data<double>());
  }
  return out;
}

}  // namespace

Tensor sum_dim(const Tensor& self, const Shape& dim, bool keepdim, std::optional<DType> dtype) {
  return reduce("sum", self, dim, keepdim, dtype, false);
}

Tensor mean_dim(const Tensor& self, const Shape& dim, bool keepdim, std::optional<DType> dtype) {
  return reduce("mean", self, dim, keepdim, dtype, true);
}

Tensor mean(const Tensor& self, std::optional<DType> dtype) { return reduce("mean", self, Shape{}, false, dtype, true); }

}  // namespace strata::kernels::cpu
