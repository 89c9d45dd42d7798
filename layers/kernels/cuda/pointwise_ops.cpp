// relu, gelu, add and to_copy on the GPU: strata's own kernels (pointwise.cu), no library in between, so the library row
// is only argument checks, the output allocation and the launch call itself.
#include <array>
#include <string>

#include "layers/kernels/cuda/cuda_common.h"
#include "layers/kernels/cuda/cuda_kernels.h"
#include "layers/kernels/cuda/pointwise_launch.h"
#include "lib/op_shapes.h"
#include "lib/zone.h"

namespace strata::kernels::cuda {

Tensor relu(const Tensor& self) {
  STRATA_ZONE(zone, Layer::kLibrary, "relu (cuda)");
  check_cuda_input("relu", self);
  const cudaStream_t stream = device_stream(self);
  Tensor out = Tensor::empty(self.sizes(), self.dtype(), self.device());
  STRATA_ZONE(launch, Layer::kLibrary, "relu_kernel<<<>>>");
  launch_relu(self.dtype(), self.data_ptr(), out.data_ptr(), self.numel(), stream);
  return out;
}

Tensor gelu(const Tensor& self) {
  STRATA_ZONE(zone, Layer::kLibrary, "gelu (cuda)");
  check_cuda_input("gelu", self);
  const cudaStream_t stream = device_stream(self);
  Tensor out = Tensor::empty(self.sizes(), self.dtype(), self.device());
  STRATA_ZONE(launch, Layer::kLibrary, "gelu_kernel<<<>>>");
  launch_gelu(self.dtype(), self.data_ptr(), out.data_ptr(), self.numel(), stream);
  return out;
}

namespace {
// Zone names must live as long as the timeline: one per (from, to) pair, built once.
const char* cast_zone_name(DType from, DType to) {
  static const auto kNames = [] {
    std::array<std::string, 16> names;
    for (DType a : kAllDTypes)
      for (DType b : kAllDTypes)
        names[static_cast<size_t>(a) * 4 + static_cast<size_t>(b)] =
            "cast_kernel<" + std::string(dtype_name(a)) + "," + std::string(dtype_name(b)) + "><<<>>>";
    return names;
  }();
  return kNames[static_cast<size_t>(from) * 4 + static_cast<size_t>(to)].c_str();
}
}  // namespace

Tensor to_copy(const Tensor& self, std::optional<DType> dtype) {
  STRATA_ZONE(zone, Layer::kLibrary, "to_copy (cuda)");
  check_cuda_input("to_copy", self);
  const DType to = dtype.value_or(self.dtype());
  const cudaStream_t stream = device_stream(self);
  Tensor out = Tensor::empty(self.sizes(), to, self.device());
  STRATA_ZONE(launch, Layer::kLibrary, cast_zone_name(self.dtype(), to));
  launch_cast(self.dtype(), to, self.data_ptr(), out.data_ptr(), self.numel(), stream);
  return out;
}

Tensor add(const Tensor& self, const Tensor& other, double alpha) {
  STRATA_ZONE(zone, Layer::kLibrary, "add (cuda)");
  op_shapes::check_operands("add", check_cuda_input, self, other);
  const Shape out_shape = op_shapes::elementwise(self.sizes(), other.sizes());
  const cudaStream_t stream = device_stream(self);
  Tensor out = Tensor::empty(out_shape, self.dtype(), self.device());
  STRATA_ZONE(launch, Layer::kLibrary, "add_kernel<<<>>>");
  launch_add(self.dtype(), self.data_ptr(), other.data_ptr(), alpha, out.data_ptr(), out.numel(), stream);
  return out;
}

}  // namespace strata::kernels::cuda
