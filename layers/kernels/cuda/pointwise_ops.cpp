// relu, gelu and add on the GPU: strata's own kernels (pointwise.cu), no library in between, so the library row
// is only argument checks, the output allocation and the launch call itself.
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
