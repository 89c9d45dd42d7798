#include <doctest/doctest.h>

#include "lib/device.h"
#include "lib/error.h"
#include "lib/storage.h"
#include "lib/tensor.h"

using namespace strata;

TEST_CASE("Shape: numel, str and equality") {
  CHECK(Shape{}.numel() == 1);  // a scalar has one element
  CHECK(Shape{3, 4}.numel() == 12);
  CHECK(Shape{2, 3, 4, 5}.numel() == 120);
  CHECK(Shape{2, 3, 4, 5}.str() == "2x3x4x5");
  CHECK(Shape{1024}.str() == "1024");
  CHECK(Shape{2, 3} == Shape{2, 3});
  CHECK_FALSE(Shape{2, 3} == Shape{3, 2});
  CHECK_FALSE(Shape{6} == Shape{6, 1});
  CHECK_THROWS_AS((Shape{1, 2, 3, 4, 5}), Error);
}

TEST_CASE("Tensor::empty is contiguous, row-major and 64-byte aligned") {
  Tensor t = Tensor::empty(Shape{2, 3, 5}, DType::kF32, kCPU);
  CHECK(t.defined());
  CHECK(t.dim() == 3);
  CHECK(t.numel() == 30);
  CHECK(t.nbytes() == 120);
  CHECK(t.strides() == Shape{15, 5, 1});
  CHECK(t.is_contiguous());
  CHECK(reinterpret_cast<uintptr_t>(t.data_ptr()) % kCpuAlignment == 0);
  CHECK(t.str() == "[2x3x5] f32 cpu");
  CHECK(Tensor::empty(Shape{4}, DType::kF64, kCPU).nbytes() == 32);
  CHECK_FALSE(Tensor().defined());
  CHECK(Tensor().data_ptr() == nullptr);
}

TEST_CASE("Tensor::to the same device shares storage, to a device without an allocator is unavailable") {
  Tensor t = Tensor::empty(Shape{8}, DType::kF32, kCPU);
  CHECK(t.to(kCPU).data_ptr() == t.data_ptr());
  const bool cuda_registered = [] {
    try {
      allocator_for(Device{DeviceType::kCUDA, 0});
      return true;
    } catch (const UnavailableError&) {
      return false;
    }
  }();
  if (!cuda_registered) {
    CHECK_THROWS_AS(t.to(Device{DeviceType::kCUDA, 0}), UnavailableError);
  }
}

TEST_CASE("Device names") {
  CHECK(kCPU.str() == "cpu");
  CHECK(Device{DeviceType::kCUDA, 3}.str() == "cuda:3");
  CHECK(Device{DeviceType::kCUDA, 0} == Device{DeviceType::kCUDA, 0});
  CHECK_FALSE(Device{DeviceType::kCUDA, 0} == Device{DeviceType::kCUDA, 1});
}

TEST_CASE("a zero-element allocation still returns usable, freeable memory") {
  auto storage = cpu_allocator().allocate(0, kCPU);
  CHECK(storage->data() != nullptr);
  CHECK(storage->nbytes() == 0);
}

TEST_CASE("Tensor::empty refuses sizes whose product overflows 64 bits, even with a zero among them") {
  // [0, 2^62, 2^62] holds nothing, but its row-major strides do not fit in int64.
  CHECK_THROWS_WITH_AS(Tensor::empty(Shape{0, int64_t{1} << 62, int64_t{1} << 62}, DType::kF32, kCPU),
                       "a tensor of size [0x4611686018427387904x4611686018427387904]: sizes must be non-negative "
                       "and their product must fit in 64 bits",
                       UsageError);
  CHECK_THROWS_AS(Tensor::empty(Shape{int64_t{1} << 40, int64_t{1} << 40}, DType::kF32, kCPU), UsageError);
  CHECK_THROWS_AS(Tensor::empty(Shape{-1}, DType::kF32, kCPU), UsageError);
  const Tensor empty = Tensor::empty(Shape{0, int64_t{1} << 40}, DType::kF32, kCPU);  // fits: allowed
  CHECK(empty.numel() == 0);
  CHECK(empty.is_contiguous());
}
