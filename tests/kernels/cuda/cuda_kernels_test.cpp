// Every CUDA kernel path (layers/kernels/cuda) against the float64 reference (layers/kernels/reference),
// on fresh random inputs (frontend::random_tensor, uniform in [-1, 1), never zeros), with the per-dtype
// tolerance of reference::tolerance. GPU only (ctest label gpu): gpu_test_main.cpp skips without a device.
#include <cublasLt.h>
#include <doctest/doctest.h>

#include <cstring>
#include <string>
#include <vector>

#include "layers/autograd/engine.h"
#include "layers/frontend/frontend.h"
#include "layers/kernels/cpu/cpu_kernels.h"
#include "layers/kernels/cuda/cuda_kernels.h"
#include "layers/kernels/reference/reference.h"
#include "tests/kernels/empty_reductions.h"
#include "layers/runtime/cuda/cuda_runtime_layer.h"
#include "tests/kernels/fresh_seed.h"
#include "lib/error.h"
#include "lib/op_shapes.h"
#include "lib/views.h"

using namespace strata;
namespace cuda = strata::kernels::cuda;

namespace {

const Device kGpu{DeviceType::kCUDA, 0};
constexpr DType kDTypes[] = {DType::kF32, DType::kF64, DType::kF16, DType::kBF16};

void init() { runtime::cuda::init_device(0); }

// Fresh inputs on every run: the seed is printed with any failure, STRATA_TEST_SEED replays it.
uint64_t g_seed = testing::run_seed() + 1000;
Tensor random(const Shape& shape, DType dtype) { return frontend::random_tensor(shape, dtype, kGpu, g_seed++); }

void check_against_reference(const Tensor& out, const std::vector<double>& ref, DType dtype, bool tf32 = false) {
  INFO("seed " << testing::run_seed());
  REQUIRE(out.device() == kGpu);
  REQUIRE(out.dtype() == dtype);
  const double error = reference::relative_error(out, ref);
  const double tolerance = reference::tolerance(dtype, tf32);
  CAPTURE(error);
  CAPTURE(tolerance);
  CHECK(error <= tolerance);
}

// TF32 is process-wide state; restore it whatever a test does.
struct Tf32Scope {
  explicit Tf32Scope(bool on) { cuda::set_tf32(on); }
  ~Tf32Scope() { cuda::set_tf32(false); }
};

}  // namespace

TEST_CASE("matmul: cublasGemmEx in every dtype, square and odd shapes, against float64") {
  init();
  struct Mkn {
    int64_t m, k, n;
  };
  for (const Mkn s : {Mkn{64, 64, 64}, Mkn{257, 129, 63}, Mkn{1, 1024, 1}, Mkn{128, 4096, 96}}) {
    for (DType dtype : kDTypes) {
      CAPTURE(dtype_name(dtype));
      CAPTURE(s.m);
      CAPTURE(s.k);
      CAPTURE(s.n);
      const Tensor a = random({s.m, s.k}, dtype), b = random({s.k, s.n}, dtype);
      const Tensor out = cuda::matmul(a, b);
      CHECK(out.sizes() == Shape{s.m, s.n});
      check_against_reference(out, reference::matmul(a, b), dtype);
    }
  }
}

TEST_CASE("matmul and linear with --tf32: TF32 tensor cores within the tf32 tolerance") {
  init();
  Tf32Scope tf32(true);
  CHECK(cuda::tf32_enabled());
  const Tensor a = random({256, 512}, DType::kF32), b = random({512, 192}, DType::kF32);
  check_against_reference(cuda::matmul(a, b), reference::matmul(a, b), DType::kF32, true);
  const Tensor x = random({32, 768}, DType::kF32), w = random({384, 768}, DType::kF32), bias = random({384}, DType::kF32);
  check_against_reference(cuda::linear(x, w, bias), reference::linear(x, w, bias), DType::kF32, true);
}

TEST_CASE("linear: cuBLASLt bias epilogue (f32/f16/bf16), GemmEx + bias kernel (f64), and no bias") {
  init();
  struct Shape3 {
    int64_t batch, in, out;
  };
  for (const Shape3 s : {Shape3{32, 768, 3072}, Shape3{7, 33, 65}}) {
    for (DType dtype : kDTypes) {
      CAPTURE(dtype_name(dtype));
      CAPTURE(s.batch);
      CAPTURE(s.in);
      CAPTURE(s.out);
      const Tensor x = random({s.batch, s.in}, dtype), w = random({s.out, s.in}, dtype), b = random({s.out}, dtype);
      const Tensor with_bias = cuda::linear(x, w, b);
      CHECK(with_bias.sizes() == Shape{s.batch, s.out});
      check_against_reference(with_bias, reference::linear(x, w, b), dtype);
      check_against_reference(cuda::linear(x, w, Tensor()), reference::linear(x, w, Tensor()), dtype);
    }
  }
}

TEST_CASE("conv2d: cuDNN's searched algorithm plus strata's bias kernel, strides and padding, every dtype") {
  init();
  struct Conv {
    int64_t n, c, h, w, k, r, stride, pad;
  };
  for (const Conv s : {Conv{2, 8, 16, 16, 16, 3, 1, 1}, Conv{1, 3, 17, 13, 5, 3, 2, 0}, Conv{4, 16, 8, 8, 32, 1, 1, 0}}) {
    for (DType dtype : kDTypes) {
      CAPTURE(dtype_name(dtype));
      INFO("conv " << s.n << "x" << s.c << "x" << s.h << "x" << s.w << " K " << s.k << " R " << s.r << " stride "
                   << s.stride << " pad " << s.pad);
      const Tensor x = random({s.n, s.c, s.h, s.w}, dtype), w = random({s.k, s.c, s.r, s.r}, dtype);
      const Tensor b = random({s.k}, dtype);
      check_against_reference(cuda::conv2d(x, w, b, {s.stride}, {s.pad}, {1}, 1), reference::conv2d(x, w, b, {s.stride}, {s.pad}, {1}, 1), dtype);
      check_against_reference(cuda::conv2d(x, w, Tensor(), {s.stride}, {s.pad}, {1}, 1),
                              reference::conv2d(x, w, Tensor(), {s.stride}, {s.pad}, {1}, 1), dtype);
    }
  }
}

TEST_CASE("conv2d and its gradients with torch's options: (H, W) stride and padding, dilation, groups (cuDNN's group count)") {
  init();
  struct Conv {
    Shape input, weight, stride, padding, dilation;
    int64_t groups;
  };
  for (const Conv& s : {Conv{Shape{2, 6, 9, 7}, Shape{4, 3, 3, 3}, Shape{2, 1}, Shape{1, 0}, Shape{1}, 2},
                       Conv{Shape{1, 4, 11, 9}, Shape{4, 1, 3, 3}, Shape{1}, Shape{2, 1}, Shape{2, 3}, 4},
                       Conv{Shape{2, 3, 10, 10}, Shape{6, 1, 2, 3}, Shape{3, 2}, Shape{0}, Shape{2}, 3}}) {
    for (DType dtype : kDTypes) {
      CAPTURE(dtype_name(dtype));
      CAPTURE(s.input.str());
      CAPTURE(s.groups);
      const Tensor x = random(s.input, dtype), w = random(s.weight, dtype), b = random(Shape{s.weight[0]}, dtype);
      const Tensor y = cuda::conv2d(x, w, b, s.stride, s.padding, s.dilation, s.groups);
      check_against_reference(y, reference::conv2d(x, w, b, s.stride, s.padding, s.dilation, s.groups), dtype);
      const Tensor g = random(y.sizes(), dtype);
      check_against_reference(cuda::conv2d_input_backward(g, x, w, s.stride, s.padding, s.dilation, s.groups),
                              reference::conv2d_input_backward(g, x, w, s.stride, s.padding, s.dilation, s.groups), dtype);
      check_against_reference(cuda::conv2d_weight_backward(g, x, w, s.stride, s.padding, s.dilation, s.groups),
                              reference::conv2d_weight_backward(g, x, w, s.stride, s.padding, s.dilation, s.groups),
                              dtype);
    }
  }
}

TEST_CASE("conv2d with --tf32") {
  init();
  Tf32Scope tf32(true);
  const Tensor x = random({4, 32, 28, 28}, DType::kF32), w = random({64, 32, 3, 3}, DType::kF32);
  const Tensor b = random({64}, DType::kF32);
  check_against_reference(cuda::conv2d(x, w, b, {1}, {1}, {1}, 1), reference::conv2d(x, w, b, {1}, {1}, {1}, 1), DType::kF32, true);
}

TEST_CASE("conv2d of a shape first seen during a CUDA Graph capture is refused - planned eagerly, it captures") {
  init();
  // Another shape first, eagerly: the cuDNN handle and its modules exist before the capture, whatever
  // test ran before this one, so the only thing the capture can trip over is the plan.
  (void)cuda::conv2d(random({1, 2, 5, 5}, DType::kF32), random({3, 2, 3, 3}, DType::kF32), Tensor(), {1}, {1}, {1}, 1);
  runtime::cuda::synchronize(0);
  const Tensor x = random({2, 6, 11, 9}, DType::kF32), w = random({7, 6, 3, 3}, DType::kF32);
  const Tensor b = random({7}, DType::kF32);
  Tensor captured;
  auto issue = [&] { captured = cuda::conv2d(x, w, b, {1}, {1}, {1}, 1); };
  try {
    runtime::cuda::CapturedGraph graph(0, issue);
    FAIL("the capture of an unplanned conv2d shape was not refused");
  } catch (const Error& e) {
    const std::string what = e.what();
    CAPTURE(what);
    CHECK(what.find("CUDA Graph capture failed") != std::string::npos);
    CHECK(what.find("run the shape once eagerly before capturing it") != std::string::npos);
  }
  CHECK_FALSE(runtime::cuda::capturing(0));  // the refused capture was ended
  check_against_reference(cuda::conv2d(x, w, b, {1}, {1}, {1}, 1), reference::conv2d(x, w, b, {1}, {1}, {1}, 1), DType::kF32);
  runtime::cuda::CapturedGraph graph(0, issue);
  CHECK(graph.nodes() > 0);
  graph.launch();
  runtime::cuda::synchronize(0);
  check_against_reference(captured, reference::conv2d(x, w, b, {1}, {1}, {1}, 1), DType::kF32);
}

TEST_CASE("relu, gelu and add: strata's own kernels, sizes around the block and grid edges, every dtype") {
  init();
  for (int64_t n : {int64_t{1}, int64_t{255}, int64_t{256}, int64_t{257}, int64_t{1} << 20, (int64_t{1} << 20) + 3}) {
    for (DType dtype : kDTypes) {
      CAPTURE(dtype_name(dtype));
      CAPTURE(n);
      const Tensor a = random({n}, dtype), b = random({n}, dtype);
      check_against_reference(cuda::relu(a), reference::relu(a), dtype);
      check_against_reference(cuda::gelu(a), reference::gelu(a), dtype);
      check_against_reference(cuda::add(a, b, 1.0), reference::add(a, b, 1.0), dtype);
      check_against_reference(cuda::add(a, b, -0.5), reference::add(a, b, -0.5), dtype);
    }
  }
}

TEST_CASE("to_copy: strata's cast kernel for every dtype pair, bit-identical to the CPU kernel's rounding") {
  init();
  for (DType from : kDTypes) {
    const Tensor x = random({(int64_t{1} << 20) + 3}, from);
    const Tensor host = x.to(kCPU);
    for (DType to : kDTypes) {
      CAPTURE(dtype_name(from));
      CAPTURE(dtype_name(to));
      const Tensor y = cuda::to_copy(x, to);
      REQUIRE(y.dtype() == to);
      const Tensor expected = kernels::cpu::to_copy(host, to);
      const Tensor got = y.to(kCPU);
      CHECK(std::memcmp(got.data_ptr(), expected.data_ptr(), got.nbytes()) == 0);
    }
  }
  CHECK(cuda::to_copy(random({5}, DType::kF32), std::nullopt).dtype() == DType::kF32);
}

TEST_CASE("relu keeps exactly the non-negative values and zeroes the rest") {
  init();
  const Tensor x = random({4096}, DType::kF32);
  const Tensor y = cuda::relu(x).to(kCPU), xh = x.to(kCPU);
  for (int64_t i = 0; i < 4096; ++i) {
    const float v = xh.data<float>()[i];
    CHECK(y.data<float>()[i] == (v < 0 ? 0.0f : v));
  }
}

TEST_CASE("second calls reuse cached plans and blocks, and give identical results") {
  init();
  const Tensor x = random({8, 16, 32, 32}, DType::kF16), w = random({16, 16, 3, 3}, DType::kF16);
  const Tensor b = random({16}, DType::kF16);
  const Tensor first = cuda::conv2d(x, w, b, {1}, {1}, {1}, 1).to(kCPU);
  const auto before = runtime::cuda::allocator_stats(0);
  const Tensor second = cuda::conv2d(x, w, b, {1}, {1}, {1}, 1).to(kCPU);
  const auto after = runtime::cuda::allocator_stats(0);
  CHECK(std::memcmp(first.data_ptr(), second.data_ptr(), first.nbytes()) == 0);
  CHECK(after.cuda_mallocs == before.cuda_mallocs);  // steady state never reaches cudaMalloc
  CHECK(after.cache_hits > before.cache_hits);
}

TEST_CASE("kernels refuse CPU tensors and mixed dtypes with a UsageError") {
  init();
  const Tensor g = random({4, 4}, DType::kF32), h = random({4, 4}, DType::kF16);
  const Tensor c = frontend::random_tensor({4, 4}, DType::kF32, kCPU, 1);
  CHECK_THROWS_AS(cuda::matmul(g, c), UsageError);
  CHECK_THROWS_AS(cuda::matmul(g, h), UsageError);
  CHECK_THROWS_AS(cuda::relu(c), UsageError);
  CHECK_THROWS_AS(cuda::add(g, h, 1.0), UsageError);
}

// ---- The gradient ops (what the autograd engine calls) and a backward pass on the GPU -----------------

TEST_CASE("gradient ops: gemm's transposes, conv2d's input/weight gradients, the reductions, every dtype") {
  init();
  for (DType dtype : kDTypes) {
    CAPTURE(dtype_name(dtype));
    for (int64_t ta : {0, 1})
      for (int64_t tb : {0, 1}) {
        const Tensor a = random(ta ? Shape{129, 257} : Shape{257, 129}, dtype);
        const Tensor b = random(tb ? Shape{63, 129} : Shape{129, 63}, dtype);
        check_against_reference(cuda::gemm(a, b, ta, tb), reference::gemm(a, b, ta, tb), dtype);
      }
    const Tensor x = random({2, 8, 16, 16}, dtype), w = random({16, 8, 3, 3}, dtype);
    const Tensor g = random({2, 16, 8, 8}, dtype);  // stride 2, pad 1
    check_against_reference(cuda::conv2d_input_backward(g, x, w, {2}, {1}, {1}, 1), reference::conv2d_input_backward(g, x, w, {2}, {1}, {1}, 1), dtype);
    check_against_reference(cuda::conv2d_weight_backward(g, x, w, {2}, {1}, {1}, 1), reference::conv2d_weight_backward(g, x, w, {2}, {1}, {1}, 1), dtype);
    check_against_reference(cuda::bias_backward(g), reference::bias_backward(g), dtype);
    const Tensor rows = random({33, 3072}, dtype);
    check_against_reference(cuda::bias_backward(rows), reference::bias_backward(rows), dtype);
    for (int64_t n : {int64_t{1}, int64_t{257}, (int64_t{1} << 20) + 3}) {
      CAPTURE(n);
      const Tensor v = random({n}, dtype), grad = random({n}, dtype);
      check_against_reference(cuda::sum(v), reference::sum(v), dtype);
      check_against_reference(cuda::ones_like(v), reference::ones_like(v), dtype);
      check_against_reference(cuda::threshold_backward(grad, v, 0.0), reference::threshold_backward(grad, v, 0.0), dtype);
      check_against_reference(cuda::gelu_backward(grad, v), reference::gelu_backward(grad, v), dtype);
      check_against_reference(cuda::mul_scalar(grad, 1e-8), reference::mul_scalar(grad, 1e-8), dtype);
      const Tensor one = random({1}, dtype);
      check_against_reference(cuda::expand_as(one, v), reference::expand_as(one, v), dtype);
    }
  }
}

TEST_CASE("a backward pass on the GPU: every leaf gradient of linear and conv2d against the float64 reference") {
  init();
  for (DType dtype : {DType::kF32, DType::kF64}) {
    CAPTURE(dtype_name(dtype));
    for (const char* spec : {"linear|32x768x3072", "conv2d|4x3x31x29"}) {
      const std::string s = spec;
      const frontend::OpSpec op = frontend::parse_op_spec(s.substr(0, s.find('|')), s.substr(s.find('|') + 1));
      const frontend::PreparedCall call =
          frontend::prepare_call(op, dtype, kGpu, testing::run_seed() + 5, true, SIZE_MAX);
      const binding::IValue out = call.op->call(call.args);
      const Tensor upstream = random(out.tensor().sizes(), dtype);
      autograd::backward(out.tensor(), upstream);
      const reference::Grads want = frontend::reference_gradients(op, call, upstream);
      for (size_t i = 0; i < call.args.size(); ++i) {
        if (!call.args[i].is_tensor()) continue;
        CAPTURE(i);
        REQUIRE(call.args[i].tensor().grad().defined());
        check_against_reference(call.args[i].tensor().grad(), want[i], dtype);
      }
    }
  }
}

TEST_CASE("reductions across many blocks: sum and bias_backward, odd tails and every layout, against float64") {
  init();
  // Sizes around the split into slices of 256 threads x 16 elements (channel_sum_parts): one block, just
  // over one, many with an odd tail, and more slices than one pass-2 step reads.
  const int64_t sums[] = {4095, 4096, 4097, 3 * 4096 + 1, (int64_t{1} << 20) + 7, (int64_t{1} << 22) + 4097};
  for (DType dtype : kDTypes) {
    CAPTURE(dtype_name(dtype));
    for (int64_t n : sums) {
      CAPTURE(n);
      const Tensor v = random({n}, dtype);
      check_against_reference(cuda::sum(v), reference::sum(v), dtype);
    }
    // bias_backward's three layouts: [B,C] (inner 1: strided, no division), [1,C,H,W] (outer 1:
    // contiguous), [N,C,H,W] (the general index), each with channels split across blocks.
    for (const Shape& shape : {Shape{70001, 3}, Shape{1, 5, 211, 307}, Shape{9, 4, 129, 131}, Shape{32, 64, 56, 56}}) {
      CAPTURE(shape.str());
      const Tensor g = random(shape, dtype);
      check_against_reference(cuda::bias_backward(g), reference::bias_backward(g), dtype);
    }
  }
}

// The kernels check_empty_reductions calls (tests/kernels/empty_reductions.h).
struct CudaKernels {
  static constexpr auto kMatmul = &cuda::matmul;
  static constexpr auto kGemm = &cuda::gemm;
  static constexpr auto kLinear = &cuda::linear;
  static constexpr auto kConv2d = &cuda::conv2d;
  static constexpr auto kConv2dInputBackward = &cuda::conv2d_input_backward;
  static constexpr auto kConv2dWeightBackward = &cuda::conv2d_weight_backward;
  static constexpr auto kBiasBackward = &cuda::bias_backward;
  static constexpr auto kSum = &cuda::sum;
};

TEST_CASE("accumulating kernels write their whole output when the reduced dimension is empty (N = 0, K = 0, C = 0)") {
  init();
  for (DType dtype : kDTypes) testing::check_empty_reductions(CudaKernels{}, kGpu, dtype);
}

// Views (docs/views.md) on the GPU. The float64 reference reads host copies; the references here are of
// the contiguous bases the views were made of, with the transposes the views stand for as GEMM flags.
TEST_CASE("cuBLASLt on views at an offset: plans per operand alignment, a result or a refusal, never a fault") {
  // Note [cuBLASLt operand alignment] (gemm_candidates.h): each call first at the allocator's alignment, so
  // that a plan cached for 256-byte-aligned pointers is there to be reused; then the input one row into its
  // block (5 elements: 20 bytes in f32, 10 in f16/bf16), then the bias one element in too, below what the
  // bias epilogue is given.
  init();
  for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
    CAPTURE(dtype_name(dtype));
    const Tensor x0 = random({33, 5}, dtype), w = random({7, 5}, dtype), b0 = random({8}, dtype);
    const Tensor x_aligned = views::narrow(x0, 0, 0, 32), b_aligned = views::narrow(b0, 0, 0, 7);
    const Tensor x_offset = views::narrow(x0, 0, 1, 32), b_offset = views::narrow(b0, 0, 1, 7);
    REQUIRE(x_offset.is_contiguous());
    REQUIRE(cuda::lt_alignment(x_offset.data_ptr()) < cuda::kLtMinBiasAlignment);
    REQUIRE(cuda::lt_alignment(b_offset.data_ptr()) < cuda::kLtMinBiasAlignment);
    // linear: cuBLASLt's bias epilogue where it has a kernel for these pointers, cublasGemmEx + the bias
    // kernel where not; right either way.
    check_against_reference(cuda::linear(x_aligned, w, b_aligned), reference::linear(x_aligned, w, b_aligned), dtype);
    check_against_reference(cuda::linear(x_offset, w, b_aligned), reference::linear(x_offset, w, b_aligned), dtype);
    check_against_reference(cuda::linear(x_offset, w, b_offset), reference::linear(x_offset, w, b_offset), dtype);
    // The compiled path's epilogue GEMM (linear's layout, the BIAS epilogue): planned for fresh blocks, then
    // run on views: a right result, or an UnavailableError that says why; a loose bias is always refused.
    constexpr int kBias = CUBLASLT_EPILOGUE_BIAS;
    if (!cuda::lt_epilogue_available(x_aligned, w, true, b_aligned, kBias)) continue;
    Tensor out = Tensor::empty({32, 7}, dtype, kGpu);
    cuda::lt_matmul_epilogue(x_aligned, w, true, b_aligned, kBias, out);
    check_against_reference(out, reference::linear(x_aligned, w, b_aligned), dtype);
    try {
      cuda::lt_matmul_epilogue(x_offset, w, true, b_aligned, kBias, out);
      check_against_reference(out, reference::linear(x_offset, w, b_aligned), dtype);
    } catch (const UnavailableError& e) {
      CHECK(std::string(e.what()).find("alignment") != std::string::npos);
    }
    CHECK_THROWS_AS(cuda::lt_matmul_epilogue(x_offset, w, true, b_offset, kBias, out), UnavailableError);
  }
}

TEST_CASE("views: cublasGemmEx reads transposed and column-narrowed views with op flags, against float64") {
  init();
  for (DType dtype : kDTypes) {
    CAPTURE(dtype_name(dtype));
    const Tensor x = random({65, 33}, dtype), w = random({17, 33}, dtype), a = random({33, 65}, dtype);
    const Tensor b = random({33, 17}, dtype);
    check_against_reference(cuda::matmul(x, views::t(w)), reference::gemm(x, w, 0, 1), dtype);          // x @ w.t()
    check_against_reference(cuda::matmul(views::t(a), b), reference::gemm(a, b, 1, 0), dtype);          // a.t() @ b
    check_against_reference(cuda::gemm(x, views::t(b), 0, 1), reference::matmul(x, b), dtype);          // flags compose
    check_against_reference(cuda::gemm(views::t(x), views::t(b), 1, 1), reference::matmul(x, b), dtype);   // both undone
    // Every other column block of a wider matrix: read with the wider leading dimension.
    const Tensor wide = random({33, 40}, dtype);
    const Tensor narrow = views::narrow(wide, 1, 3, 17);
    check_against_reference(cuda::matmul(x, narrow), reference::matmul(x, cuda::contiguous(narrow)), dtype);
  }
}

TEST_CASE("matmul with torch.matmul's shapes: 1-D operands, batches (strided-batched and looped), views, against float64") {
  init();
  struct Case {
    Shape self, other;
  };
  const Case cases[] = {{Shape{33}, Shape{33}},         {Shape{33}, Shape{33, 17}},        {Shape{65, 33}, Shape{33}},
                        {Shape{3, 65, 33}, Shape{3, 33, 17}}, {Shape{65, 33}, Shape{3, 33, 17}},
                        {Shape{3, 65, 33}, Shape{33}},   {Shape{2, 1, 9, 33}, Shape{5, 33, 7}},  // a broadcast dim in the middle: the loop
                        {Shape{2, 0, 33}, Shape{33, 4}}, {Shape{2, 5, 0}, Shape{2, 0, 4}}};
  for (DType dtype : kDTypes) {
    CAPTURE(dtype_name(dtype));
    for (const Case& c : cases) {
      CAPTURE(c.self.str());
      CAPTURE(c.other.str());
      const Tensor a = random(c.self, dtype), b = random(c.other, dtype);
      const Tensor out = cuda::matmul(a, b);
      CHECK(out.sizes() == op_shapes::matmul(c.self, c.other));
      check_against_reference(out, reference::matmul(a, b), dtype);
    }
    const Tensor v = views::transpose(random({3, 33, 65}, dtype), 1, 2);  // [3,65,33], transposed matrices
    const Tensor w = random({33, 17}, dtype);
    check_against_reference(cuda::matmul(v, w), reference::matmul(v, w), dtype);
  }
}

TEST_CASE("views: contiguous() is strata's strided copy, bit-identical to the CPU copy, for every layout") {
  init();
  for (DType dtype : kDTypes) {
    CAPTURE(dtype_name(dtype));
    const Tensor base = random({3, 5, 7, 9}, dtype);
    const Tensor host = base.to(kCPU);
    auto layouts = [](const Tensor& t) {
      return std::vector<Tensor>{views::transpose(t, 1, 3), views::slice(t, 3, 1, 9, 2), views::select(t, 0, 2),
                                 views::permute(t, Shape{3, 1, 0, 2}),
                                 views::expand(views::narrow(t, 2, 4, 1), Shape{3, 5, 6, 9})};
    };
    const std::vector<Tensor> on_gpu = layouts(base), on_cpu = layouts(host);
    for (size_t i = 0; i < on_gpu.size(); ++i) {
      CAPTURE(i);
      const Tensor got = cuda::contiguous(on_gpu[i]).to(kCPU), want = kernels::cpu::contiguous(on_cpu[i]);
      REQUIRE(got.sizes() == want.sizes());
      CHECK(std::memcmp(got.data_ptr(), want.data_ptr(), want.nbytes()) == 0);
    }
    const Tensor same = cuda::contiguous(base);  // contiguous: itself, nothing allocated
    CHECK(same.storage() == base.storage());
  }
}
