// conv2d on cuDNN, with the algorithm chosen by cuDNN's own timed search.
//
// cuDNN 9 keeps the v7-style convolution API (deprecated, not removed) next to the graph API. strata uses
// it because cudnnFindConvolutionForwardAlgorithmEx is exactly the step users want to see: cuDNN runs
// every applicable algorithm on the real buffers and ranks them by time. The search runs once per shape
// (device, dtype, math mode, sizes), in the cold call, in its own zone; steady calls reuse the plan.
// The bias is added by strata's own kernel afterwards (cuDNN's fused bias path is limited to one algorithm
// and would defeat the search).
#include <cudnn.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "layers/kernels/cuda/cuda_common.h"
#include "layers/kernels/cuda/cuda_kernels.h"
#include "layers/kernels/cuda/pointwise_launch.h"
#include "lib/op_shapes.h"
#include "lib/zone.h"

namespace strata::kernels::cuda {
namespace {

// Upper bound on the workspace offered to the search: algorithms that want more are not considered.
constexpr size_t kMaxSearchWorkspace = size_t{1} << 30;

struct CudnnHandle {
  cudnnHandle_t handle = nullptr;
};
runtime::cuda::PerDevice<CudnnHandle> g_handles("cuDNN");

cudnnHandle_t handle_for(const Tensor& t, cudaStream_t stream) {
  return g_handles.get(t.device().index, [&](CudnnHandle& h) {
    {
      STRATA_ZONE_KIND(zone, Layer::kLibrary, "cudnnCreate", ZoneKind::kHandleCreation);
      STRATA_CUDNN_CHECK(cudnnCreate(&h.handle));
    }
    STRATA_CUDNN_CHECK(cudnnSetStream(h.handle, stream));
  }).handle;
}

cudnnDataType_t cudnn_dtype(DType dtype) {
  switch (dtype) {
    case DType::kF32: return CUDNN_DATA_FLOAT;
    case DType::kF64: return CUDNN_DATA_DOUBLE;
    case DType::kF16: return CUDNN_DATA_HALF;
    case DType::kBF16: return CUDNN_DATA_BFLOAT16;
  }
  throw Error("cuDNN: unknown dtype");
}

// f16 / bf16 accumulate in f32; f32 and f64 in their own precision.
cudnnDataType_t compute_dtype(DType dtype) { return dtype == DType::kF64 ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT; }

// On Ampere and newer CUDNN_DEFAULT_MATH lets f32 convolutions run on TF32 tensor cores; only FMA_MATH
// keeps f32 exact, so that is what plain f32 asks for (PyTorch does the same when allow_tf32 is off).
cudnnMathType_t requested_math(DType dtype, bool tf32) {
  switch (dtype) {
    case DType::kF32: return tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH;
    case DType::kF16:
    case DType::kBF16: return CUDNN_TENSOR_OP_MATH;
    case DType::kF64: return CUDNN_DEFAULT_MATH;
  }
  return CUDNN_DEFAULT_MATH;
}

const char* algo_name(cudnnConvolutionFwdAlgo_t algo) {
  switch (algo) {
    case CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM: return "IMPLICIT_GEMM";
    case CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM: return "IMPLICIT_PRECOMP_GEMM";
    case CUDNN_CONVOLUTION_FWD_ALGO_GEMM: return "GEMM";
    case CUDNN_CONVOLUTION_FWD_ALGO_DIRECT: return "DIRECT";
    case CUDNN_CONVOLUTION_FWD_ALGO_FFT: return "FFT";
    case CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING: return "FFT_TILING";
    case CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD: return "WINOGRAD";
    case CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED: return "WINOGRAD_NONFUSED";
    default: return "unknown algorithm";
  }
}

const char* math_name(cudnnMathType_t math) {
  switch (math) {
    case CUDNN_DEFAULT_MATH: return "default math";
    case CUDNN_TENSOR_OP_MATH: return "tensor-op math";
    case CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION: return "tensor-op math with conversion";
    case CUDNN_FMA_MATH: return "FMA math";
    default: return "unknown math";
  }
}

bool acceptable_math(DType dtype, bool tf32, cudnnMathType_t math) {
  if (dtype == DType::kF32 && !tf32) return math == CUDNN_FMA_MATH;
  return true;
}

struct ConvPlan {
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  cudnnConvolutionFwdAlgo_t algo{};
  size_t workspace_bytes = 0;

  ConvPlan() = default;
  ConvPlan(const ConvPlan&) = delete;
  ConvPlan& operator=(const ConvPlan&) = delete;
  // Cached plans live for the process; this is for a plan whose construction threw half-way.
  ~ConvPlan() {
    if (x != nullptr) (void)cudnnDestroyTensorDescriptor(x);
    if (y != nullptr) (void)cudnnDestroyTensorDescriptor(y);
    if (w != nullptr) (void)cudnnDestroyFilterDescriptor(w);
    if (conv != nullptr) (void)cudnnDestroyConvolutionDescriptor(conv);
  }
};
// A plan's key: device, dtype, TF32, and every size and option of the geometry.
using ConvKey = std::tuple<int, DType, bool, std::array<int64_t, 16>>;
ConvKey conv_key(const Tensor& t, bool tf32, const op_shapes::Conv2dGeometry& g) {
  return {t.device().index, t.dtype(), tf32,
          std::array<int64_t, 16>{g.batch, g.in_channels, g.height, g.width, g.out_channels, g.kernel_h, g.kernel_w,
                                  g.stride_h, g.stride_w, g.pad_h, g.pad_w, g.dilation_h, g.dilation_w, g.groups,
                                  g.out_height, g.out_width}};
}

// The input, filter and convolution descriptors of geometry g (the output's is set by the caller): the
// filter is [K, C/groups, R, S] with cudnnSetConvolutionGroupCount saying how many groups, as PyTorch's
// cuDNN path sets it.
void set_descriptors(const char* op, DType dtype, const op_shapes::Conv2dGeometry& g, cudnnTensorDescriptor_t x,
                     cudnnFilterDescriptor_t w, cudnnConvolutionDescriptor_t conv) {
  const cudnnDataType_t dt = cudnn_dtype(dtype);
  auto n = [&](int64_t v) { return checked_int(op, v); };
  STRATA_CUDNN_CHECK(cudnnSetTensor4dDescriptor(x, CUDNN_TENSOR_NCHW, dt, n(g.batch), n(g.in_channels), n(g.height),
                                                n(g.width)));
  STRATA_CUDNN_CHECK(cudnnSetFilter4dDescriptor(w, dt, CUDNN_TENSOR_NCHW, n(g.out_channels), n(g.group_in_channels()),
                                                n(g.kernel_h), n(g.kernel_w)));
  STRATA_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(conv, n(g.pad_h), n(g.pad_w), n(g.stride_h), n(g.stride_w),
                                                     n(g.dilation_h), n(g.dilation_w), CUDNN_CROSS_CORRELATION,
                                                     compute_dtype(dtype)));
  STRATA_CUDNN_CHECK(cudnnSetConvolutionGroupCount(conv, n(g.groups)));
}

// "stride 2x1 pad 1x0 dilation 1x1 groups 1", for the plan notes.
std::string options_text(const op_shapes::Conv2dGeometry& g) {
  auto pair = [](int64_t h, int64_t w) { return std::to_string(h) + "x" + std::to_string(w); };
  return "stride " + pair(g.stride_h, g.stride_w) + " pad " + pair(g.pad_h, g.pad_w) + " dilation " +
         pair(g.dilation_h, g.dilation_w) + " groups " + std::to_string(g.groups);
}
std::mutex g_plan_mutex;

// Note [Plan caches outlive static destruction]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// The plan caches (cuDNN's here, cuBLASLt's in cublas_gemm.cpp) are allocated once and never destroyed,
// as the caching allocator is. As namespace-scope objects their destructors would run at exit and call
// cudnnDestroy* / cublasLt*Destroy during static destruction, in an order no one controls: cuDNN 9 dlopens
// its sub-libraries (libcudnn_ops, libcudnn_cnn, ...) and may have unloaded them by then, so a run that
// finished could crash on its way out. The process's exit returns the descriptors' memory anyway.
std::map<ConvKey, std::unique_ptr<ConvPlan>>& forward_plans() {
  static auto* cache = new std::map<ConvKey, std::unique_ptr<ConvPlan>>();
  return *cache;
}

std::unique_ptr<ConvPlan> make_plan(cudnnHandle_t handle, const Tensor& input, const Tensor& weight, Tensor& out,
                                    const op_shapes::Conv2dGeometry& g, bool tf32) {
  // The search below queries free memory and runs and times every algorithm on the stream: inside a CUDA
  // Graph capture those kernels would be captured as the op's own, or the query would invalidate the
  // capture. A shape is planned by its first eager call; one first seen while capturing is refused.
  if (runtime::cuda::capturing(input.device().index)) {
    throw Error("conv2d: no cuDNN algorithm is chosen yet for input " + input.sizes().str() + " weight " +
                weight.sizes().str() + " " + std::string(dtype_name(input.dtype())) + (tf32 ? " (tf32)" : "") +
                ", and cuDNN's algorithm search cannot run inside a CUDA Graph capture; run the shape once "
                "eagerly before capturing it");
  }
  const DType dtype = input.dtype();
  const cudnnDataType_t dt = cudnn_dtype(dtype);
  auto plan = std::make_unique<ConvPlan>();
  STRATA_CUDNN_CHECK(cudnnCreateTensorDescriptor(&plan->x));
  STRATA_CUDNN_CHECK(cudnnCreateTensorDescriptor(&plan->y));
  STRATA_CUDNN_CHECK(cudnnCreateFilterDescriptor(&plan->w));
  STRATA_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&plan->conv));
  set_descriptors("conv2d", dtype, g, plan->x, plan->w, plan->conv);
  STRATA_CUDNN_CHECK(cudnnSetConvolutionMathType(plan->conv, requested_math(dtype, tf32)));
  int on = 0, oc = 0, oh = 0, ow = 0;
  STRATA_CUDNN_CHECK(cudnnGetConvolution2dForwardOutputDim(plan->conv, plan->x, plan->w, &on, &oc, &oh, &ow));
  if (on != g.batch || oc != g.out_channels || oh != g.out_height || ow != g.out_width) {
    throw Error("conv2d: cuDNN computes output " + Shape{on, oc, oh, ow}.str() + " but strata expects " +
                g.output().str());
  }
  STRATA_CUDNN_CHECK(cudnnSetTensor4dDescriptor(plan->y, CUDNN_TENSOR_NCHW, dt, on, oc, oh, ow));

  STRATA_ZONE_KIND(zone, Layer::kLibrary, "cudnnFindConvolutionForwardAlgorithmEx", ZoneKind::kAlgorithmSearch);
  // Offer the search the largest workspace any algorithm asks for (within a budget and free memory), so
  // no algorithm is skipped for want of memory. Sizes of unsupported algorithms fail and are skipped.
  const size_t budget = std::min(kMaxSearchWorkspace, runtime::cuda::free_bytes(input.device().index) / 2);
  size_t search_bytes = 0;
  for (int a = 0; a < CUDNN_CONVOLUTION_FWD_ALGO_COUNT; ++a) {
    size_t bytes = 0;
    if (cudnnGetConvolutionForwardWorkspaceSize(handle, plan->x, plan->w, plan->conv, plan->y,
                                                static_cast<cudnnConvolutionFwdAlgo_t>(a), &bytes) == CUDNN_STATUS_SUCCESS &&
        bytes <= budget) {
      search_bytes = std::max(search_bytes, bytes);
    }
  }
  // The sizes of unsupported algorithms failed on purpose, and each failure left a message that
  // throw_cudnn_error would later append to an unrelated error: reading it here discards it.
  char discarded[256];
  cudnnGetLastErrorString(discarded, sizeof discarded);
  std::shared_ptr<Storage> search_workspace =
      search_bytes > 0 ? runtime::cuda::caching_allocator().allocate(search_bytes, input.device()) : nullptr;
  int max_results = 0;
  STRATA_CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithmMaxCount(handle, &max_results));
  std::vector<cudnnConvolutionFwdAlgoPerf_t> results(static_cast<size_t>(std::max(max_results, 1)));
  int returned = 0;
  // Runs on the real buffers: the output is overwritten, which the forward call below does again anyway.
  // Twice, and the second ranking is used: with CUDA's lazy module loading, the first search's time for an
  // algorithm includes loading its kernels (its GPU timer runs while the host loads the module), which
  // ranked a 345 us implicit GEMM above a 130 us Winograd on an H200 (docs/validation, 2026-11-27).
  for (int search = 0; search < 2; ++search) {
    STRATA_CUDNN_CHECK(cudnnFindConvolutionForwardAlgorithmEx(
        handle, plan->x, input.data_ptr(), plan->w, weight.data_ptr(), plan->conv, plan->y, out.data_ptr(),
        static_cast<int>(results.size()), &returned, results.data(),
        search_workspace ? search_workspace->data() : nullptr, search_bytes));
  }
  // Results come sorted by measured time; take the fastest that worked and keeps the requested precision.
  const cudnnConvolutionFwdAlgoPerf_t* best = nullptr;
  for (int i = 0; i < returned; ++i) {
    const cudnnConvolutionFwdAlgoPerf_t& r = results[static_cast<size_t>(i)];
    if (r.status == CUDNN_STATUS_SUCCESS && r.memory <= search_bytes && acceptable_math(dtype, tf32, r.mathType)) {
      best = &r;
      break;
    }
  }
  if (best == nullptr) {
    throw Error("conv2d: cuDNN found no forward algorithm for input " + input.str() + " weight " + weight.str() +
                (dtype == DType::kF32 && !tf32 ? " in exact f32 math (try --tf32)" : ""));
  }
  plan->algo = best->algo;
  plan->workspace_bytes = best->memory;
  STRATA_CUDNN_CHECK(cudnnSetConvolutionMathType(plan->conv, best->mathType));
  int measured = 0;
  for (int i = 0; i < returned; ++i) measured += results[static_cast<size_t>(i)].status == CUDNN_STATUS_SUCCESS;
  char time[32];
  std::snprintf(time, sizeof time, "%.1f us", double(best->time) * 1e3);
  tracing::annotate(AnnotationKind::kPlan, "conv2d [" + input.sizes().str() + "] * [" + weight.sizes().str() + "] " +
                          std::string(dtype_name(dtype)) + (tf32 ? " (tf32)" : "") + " " + options_text(g) +
                          ": cuDNN chose " + algo_name(best->algo) + " (" +
                          math_name(best->mathType) + ", workspace " + format_bytes(double(best->memory)) +
                          ", " + time + " in its second search), fastest acceptable of " +
                          std::to_string(measured) + " algorithms it could run");
  return plan;
}

}  // namespace

Tensor conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias, const Shape& stride, const Shape& padding,
              const Shape& dilation, int64_t groups) {
  STRATA_ZONE(zone, Layer::kLibrary, "conv2d (cuda)");
  op_shapes::check_operands("conv2d", check_cuda_input, input, weight, bias);
  const op_shapes::Conv2dGeometry g = op_shapes::conv2d(input.sizes(), weight.sizes(),
                                                        bias.defined() ? &bias.sizes() : nullptr, stride, padding,
                                                        dilation, groups);
  const cudaStream_t stream = device_stream(input);
  const cudnnHandle_t handle = handle_for(input, stream);
  Tensor out = Tensor::empty(g.output(), input.dtype(), input.device());
  if (out.numel() == 0) return out;
  if (g.group_in_channels() * g.kernel_h * g.kernel_w == 0) {  // Note [Empty reductions] in cuda_common.h
    fill_zeros(out, stream);
    if (bias.defined()) {
      launch_bias_channels(input.dtype(), bias.data_ptr(), out.data_ptr(), out.numel(), g.out_channels,
                           g.out_height * g.out_width, stream);
    }
    return out;
  }

  const bool tf32 = input.dtype() == DType::kF32 && tf32_enabled();
  const ConvKey key = conv_key(input, tf32, g);
  ConvPlan* plan = nullptr;
  {
    std::lock_guard lock(g_plan_mutex);
    auto& plans = forward_plans();
    auto it = plans.find(key);
    if (it == plans.end()) it = plans.emplace(key, make_plan(handle, input, weight, out, g, tf32)).first;
    plan = it->second.get();
  }
  std::shared_ptr<Storage> workspace =
      plan->workspace_bytes > 0 ? runtime::cuda::caching_allocator().allocate(plan->workspace_bytes, input.device())
                                : nullptr;
  // Scaling factors are double for double data and float otherwise (cuDNN's rule).
  const float f_one = 1.0f, f_zero = 0.0f;
  const double d_one = 1.0, d_zero = 0.0;
  const bool f64 = input.dtype() == DType::kF64;
  {
    STRATA_ZONE(call, Layer::kLibrary, "cudnnConvolutionForward");
    STRATA_CUDNN_CHECK(cudnnConvolutionForward(
        handle, f64 ? static_cast<const void*>(&d_one) : &f_one, plan->x, input.data_ptr(), plan->w, weight.data_ptr(),
        plan->conv, plan->algo, workspace ? workspace->data() : nullptr, plan->workspace_bytes,
        f64 ? static_cast<const void*>(&d_zero) : &f_zero, plan->y, out.data_ptr()));
  }
  if (bias.defined()) {
    STRATA_ZONE(call, Layer::kLibrary, "conv_bias_kernel<<<>>>");
    launch_bias_channels(input.dtype(), bias.data_ptr(), out.data_ptr(), out.numel(), g.out_channels,
                         g.out_height * g.out_width, stream);
  }
  return out;
}

// ---- The two gradients of conv2d: cudnnConvolutionBackwardData / BackwardFilter ------------------------
// The algorithm is cuDNN's heuristic pick (the *_v7 "Get" calls, ranked without running anything), not a
// timed search as the forward does: a backward pass runs both gradients of every conv, and a per-shape
// search of each would put seconds into the cold call for what is, at strata's scale, one traced op.
namespace {

struct BackwardPlan {
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  int algo = 0;  // cudnnConvolutionBwdDataAlgo_t or cudnnConvolutionBwdFilterAlgo_t
  size_t workspace_bytes = 0;

  BackwardPlan() = default;
  BackwardPlan(const BackwardPlan&) = delete;
  BackwardPlan& operator=(const BackwardPlan&) = delete;
  ~BackwardPlan() {
    if (x != nullptr) (void)cudnnDestroyTensorDescriptor(x);
    if (y != nullptr) (void)cudnnDestroyTensorDescriptor(y);
    if (w != nullptr) (void)cudnnDestroyFilterDescriptor(w);
    if (conv != nullptr) (void)cudnnDestroyConvolutionDescriptor(conv);
  }
};
using BackwardKey = std::tuple<bool, ConvKey>;  // true: data (input) gradient, false: filter (weight)
// Never destroyed: see Note [Plan caches outlive static destruction].
std::map<BackwardKey, std::unique_ptr<BackwardPlan>>& backward_plans() {
  static auto* cache = new std::map<BackwardKey, std::unique_ptr<BackwardPlan>>();
  return *cache;
}

// The workspace `plan`'s algorithm needs under the math type its descriptor holds.
size_t backward_workspace_bytes(cudnnHandle_t handle, const BackwardPlan& plan, bool data) {
  size_t bytes = 0;
  if (data) {
    STRATA_CUDNN_CHECK(cudnnGetConvolutionBackwardDataWorkspaceSize(
        handle, plan.w, plan.y, plan.conv, plan.x, static_cast<cudnnConvolutionBwdDataAlgo_t>(plan.algo), &bytes));
  } else {
    STRATA_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterWorkspaceSize(
        handle, plan.x, plan.y, plan.conv, plan.w, static_cast<cudnnConvolutionBwdFilterAlgo_t>(plan.algo), &bytes));
  }
  return bytes;
}

std::unique_ptr<BackwardPlan> make_backward_plan(cudnnHandle_t handle, DType dtype, const op_shapes::Conv2dGeometry& g,
                                                 bool tf32, bool data) {
  const cudnnDataType_t dt = cudnn_dtype(dtype);
  const char* op = data ? "conv2d_input_backward" : "conv2d_weight_backward";
  auto n = [&](int64_t v) { return checked_int(op, v); };
  auto plan = std::make_unique<BackwardPlan>();
  STRATA_CUDNN_CHECK(cudnnCreateTensorDescriptor(&plan->x));
  STRATA_CUDNN_CHECK(cudnnCreateTensorDescriptor(&plan->y));
  STRATA_CUDNN_CHECK(cudnnCreateFilterDescriptor(&plan->w));
  STRATA_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&plan->conv));
  set_descriptors(op, dtype, g, plan->x, plan->w, plan->conv);
  STRATA_CUDNN_CHECK(cudnnSetTensor4dDescriptor(plan->y, CUDNN_TENSOR_NCHW, dt, n(g.batch), n(g.out_channels),
                                                n(g.out_height), n(g.out_width)));
  STRATA_CUDNN_CHECK(cudnnSetConvolutionMathType(plan->conv, requested_math(dtype, tf32)));
  STRATA_ZONE_KIND(zone, Layer::kLibrary, data ? "cudnnGetConvolutionBackwardDataAlgorithm_v7"
                                               : "cudnnGetConvolutionBackwardFilterAlgorithm_v7",
                   ZoneKind::kAlgorithmSearch);
  int returned = 0;
  bool found = false;
  cudnnMathType_t math = CUDNN_DEFAULT_MATH;
  if (data) {
    std::array<cudnnConvolutionBwdDataAlgoPerf_t, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT> results{};
    STRATA_CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithm_v7(handle, plan->w, plan->y, plan->conv, plan->x,
                                                                   static_cast<int>(results.size()), &returned,
                                                                   results.data()));
    for (int i = 0; i < returned && !found; ++i) {
      const auto& r = results[static_cast<size_t>(i)];
      if (r.status == CUDNN_STATUS_SUCCESS && acceptable_math(dtype, tf32, r.mathType)) {
        plan->algo = static_cast<int>(r.algo);
        math = r.mathType;
        found = true;
      }
    }
  } else {
    std::array<cudnnConvolutionBwdFilterAlgoPerf_t, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT> results{};
    STRATA_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithm_v7(handle, plan->x, plan->y, plan->conv, plan->w,
                                                                     static_cast<int>(results.size()), &returned,
                                                                     results.data()));
    for (int i = 0; i < returned && !found; ++i) {
      const auto& r = results[static_cast<size_t>(i)];
      if (r.status == CUDNN_STATUS_SUCCESS && acceptable_math(dtype, tf32, r.mathType)) {
        plan->algo = static_cast<int>(r.algo);
        math = r.mathType;
        found = true;
      }
    }
  }
  if (!found) {
    throw Error(std::string(op) + ": cuDNN's heuristic offers no algorithm for " + g.output().str() +
                (dtype == DType::kF32 && !tf32 ? " in exact f32 math (try --tf32)" : ""));
  }
  // The heuristic's math type before the workspace query: the workspace an algorithm needs depends on the
  // math type, and the descriptor still holds the requested one.
  STRATA_CUDNN_CHECK(cudnnSetConvolutionMathType(plan->conv, math));
  plan->workspace_bytes = backward_workspace_bytes(handle, *plan, data);
  tracing::annotate(AnnotationKind::kPlan, std::string(op) + " [" + g.output().str() + "] " +
                                               std::string(dtype_name(dtype)) + " " + options_text(g) +
                                               ": cuDNN's heuristic chose algorithm " +
                                               std::to_string(plan->algo) + " (" + math_name(math) + ", workspace " +
                                               format_bytes(double(plan->workspace_bytes)) + ")");
  return plan;
}

BackwardPlan& backward_plan(cudnnHandle_t handle, const Tensor& t, const op_shapes::Conv2dGeometry& g, bool data) {
  const bool tf32 = t.dtype() == DType::kF32 && tf32_enabled();
  const BackwardKey key{data, conv_key(t, tf32, g)};
  std::lock_guard lock(g_plan_mutex);
  auto& plans = backward_plans();
  auto it = plans.find(key);
  if (it == plans.end()) it = plans.emplace(key, make_backward_plan(handle, t.dtype(), g, tf32, data)).first;
  return *it->second;
}

}  // namespace

Tensor conv2d_input_backward(const Tensor& grad_output, const Tensor& input, const Tensor& weight,
                             const Shape& stride, const Shape& padding, const Shape& dilation, int64_t groups) {
  STRATA_ZONE(zone, Layer::kLibrary, "conv2d_input_backward (cuda)");
  op_shapes::check_operands("conv2d_input_backward", check_cuda_input, grad_output, input, weight);
  const auto g = op_shapes::conv2d_backward("conv2d_input_backward", grad_output.sizes(), input.sizes(),
                                            weight.sizes(), stride, padding, dilation, groups);
  const cudaStream_t stream = device_stream(grad_output);
  const cudnnHandle_t handle = handle_for(grad_output, stream);
  Tensor out = Tensor::empty(input.sizes(), input.dtype(), input.device());
  if (out.numel() == 0) return out;
  if (weight.numel() == 0) {  // no output channel or an empty window: Note [Empty reductions] in cuda_common.h
    fill_zeros(out, stream);
    return out;
  }
  BackwardPlan& plan = backward_plan(handle, grad_output, g, true);
  std::shared_ptr<Storage> workspace =
      plan.workspace_bytes > 0 ? runtime::cuda::caching_allocator().allocate(plan.workspace_bytes, input.device()) : nullptr;
  const float f_one = 1.0f, f_zero = 0.0f;
  const double d_one = 1.0, d_zero = 0.0;
  const bool f64 = input.dtype() == DType::kF64;
  STRATA_ZONE(call, Layer::kLibrary, "cudnnConvolutionBackwardData");
  STRATA_CUDNN_CHECK(cudnnConvolutionBackwardData(
      handle, f64 ? static_cast<const void*>(&d_one) : &f_one, plan.w, weight.data_ptr(), plan.y, grad_output.data_ptr(),
      plan.conv, static_cast<cudnnConvolutionBwdDataAlgo_t>(plan.algo), workspace ? workspace->data() : nullptr,
      plan.workspace_bytes, f64 ? static_cast<const void*>(&d_zero) : &f_zero, plan.x, out.data_ptr()));
  return out;
}

Tensor conv2d_weight_backward(const Tensor& grad_output, const Tensor& input, const Tensor& weight,
                             const Shape& stride, const Shape& padding, const Shape& dilation, int64_t groups) {
  STRATA_ZONE(zone, Layer::kLibrary, "conv2d_weight_backward (cuda)");
  op_shapes::check_operands("conv2d_weight_backward", check_cuda_input, grad_output, input, weight);
  const auto g = op_shapes::conv2d_backward("conv2d_weight_backward", grad_output.sizes(), input.sizes(),
                                            weight.sizes(), stride, padding, dilation, groups);
  const cudaStream_t stream = device_stream(grad_output);
  const cudnnHandle_t handle = handle_for(grad_output, stream);
  Tensor out = Tensor::empty(weight.sizes(), weight.dtype(), weight.device());
  if (out.numel() == 0) return out;
  if (grad_output.numel() == 0) {  // an empty batch: Note [Empty reductions] in cuda_common.h
    fill_zeros(out, stream);
    return out;
  }
  BackwardPlan& plan = backward_plan(handle, grad_output, g, false);
  std::shared_ptr<Storage> workspace =
      plan.workspace_bytes > 0 ? runtime::cuda::caching_allocator().allocate(plan.workspace_bytes, input.device()) : nullptr;
  const float f_one = 1.0f, f_zero = 0.0f;
  const double d_one = 1.0, d_zero = 0.0;
  const bool f64 = input.dtype() == DType::kF64;
  STRATA_ZONE(call, Layer::kLibrary, "cudnnConvolutionBackwardFilter");
  STRATA_CUDNN_CHECK(cudnnConvolutionBackwardFilter(
      handle, f64 ? static_cast<const void*>(&d_one) : &f_one, plan.x, input.data_ptr(), plan.y, grad_output.data_ptr(),
      plan.conv, static_cast<cudnnConvolutionBwdFilterAlgo_t>(plan.algo), workspace ? workspace->data() : nullptr,
      plan.workspace_bytes, f64 ? static_cast<const void*>(&d_zero) : &f_zero, plan.w, out.data_ptr()));
  return out;
}

}  // namespace strata::kernels::cuda
