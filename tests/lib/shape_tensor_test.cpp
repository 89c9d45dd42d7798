#include <doctest/doctest.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "lib/device.h"
#include "lib/error.h"
#include "lib/storage.h"
#include "lib/tensor.h"
#include "tests/support/error_text.h"

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
  // Strides that would not be row-major for any other sizes: still contiguous with no element (torch's rule).
  const Tensor strided = Tensor::empty(Shape{4, 6}, DType::kF32, kCPU).as_strided(Shape{0, 3}, Shape{6, 2}, 0);
  CHECK(strided.numel() == 0);
  CHECK(strided.is_contiguous());
  CHECK_FALSE(Tensor::empty(Shape{4, 6}, DType::kF32, kCPU).as_strided(Shape{1, 3}, Shape{6, 2}, 0).is_contiguous());
}

namespace {
// Device memory played by host memory, counting what crosses: the layout rules of Tensor::to can be
// checked without a GPU (the gpu tests repeat the round trip on a real one).
struct HostBackedDevice final : Allocator {
  size_t copied = 0;
  std::shared_ptr<Storage> allocate(size_t nbytes, Device device) override {
    void* data = std::malloc(nbytes == 0 ? 1 : nbytes);
    return std::make_shared<Storage>(data, nbytes, device, [](void*, void* p, size_t) { std::free(p); }, nullptr);
  }
  void copy_to_host(void* dst, const void* src, size_t nbytes, Device) override {
    std::memcpy(dst, src, nbytes);
    copied += nbytes;
  }
  void copy_from_host(void* dst, const void* src, size_t nbytes, Device) override {
    std::memcpy(dst, src, nbytes);
    copied += nbytes;
  }
};
}  // namespace

TEST_CASE("Tensor::to keeps a view's layout on the other device: its storage span is copied, not gathered") {
  const Device other{DeviceType::kCUDA, 0};
  Allocator* before = nullptr;
  try {
    before = &allocator_for(other);
  } catch (const UnavailableError&) {
  }
  HostBackedDevice device;
  register_allocator(DeviceType::kCUDA, &device);
  Tensor base = Tensor::empty(Shape{4, 6}, DType::kF32, kCPU);
  for (int64_t i = 0; i < base.numel(); ++i) base.data<float>()[i] = float(i) - 11.5f;
  auto at = [](const Tensor& t, int64_t r, int64_t c) {
    return t.data<float>()[r * t.strides()[0] + c * t.strides()[1]];
  };
  // A transpose (6x4, strides 1,6) and every other column of rows 1..2 (2x3 at offset 7, strides 6,2).
  for (const Tensor& view : {base.as_strided(Shape{6, 4}, Shape{1, 6}, 0), base.as_strided(Shape{2, 3}, Shape{6, 2}, 7)}) {
    CAPTURE(view.sizes().str());
    device.copied = 0;
    const Tensor there = view.to(other);
    CHECK(there.device() == other);
    CHECK(there.strides() == view.strides());
    CHECK(there.storage_offset() == 0);
    const int64_t span = 1 + (view.sizes()[0] - 1) * view.strides()[0] + (view.sizes()[1] - 1) * view.strides()[1];
    CHECK(device.copied == size_t(span) * sizeof(float));
    const Tensor back = there.to(kCPU);
    CHECK(back.strides() == view.strides());
    for (int64_t r = 0; r < view.sizes()[0]; ++r)
      for (int64_t c = 0; c < view.sizes()[1]; ++c) CHECK(at(back, r, c) == at(view, r, c));
  }
  // Contiguous and empty tensors stay what they were.
  CHECK(base.to(other).is_contiguous());
  CHECK(Tensor::empty(Shape{0, 3}, DType::kF32, kCPU).to(other).numel() == 0);
  register_allocator(DeviceType::kCUDA, before);
}

TEST_CASE("Tensor::empty refuses a byte count past 2^63 - 1, counted once and overflow-checked") {
  // Note [One byte count]: the elements fit in int64, their bytes do not. f32 [2^62] is 2^64 bytes, which
  // wrapped to 0; f64 [2^61 + 3] wrapped to 24 bytes. Both are refused, naming the size and the limit.
  const std::string refused = test::message_of<UsageError>(
      [] { (void)Tensor::empty(Shape{int64_t{1} << 62}, DType::kF32, kCPU); });
  CHECK(refused.find("[4611686018427387904] f32") != std::string::npos);
  CHECK(refused.find("2^63 - 1 bytes") != std::string::npos);
  CHECK_THROWS_AS(Tensor::empty(Shape{(int64_t{1} << 61) + 3}, DType::kF64, kCPU), UsageError);
  CHECK_THROWS_AS(Tensor::empty(Shape{int64_t{1} << 31, int64_t{1} << 31, 2}, DType::kF16, kCPU), UsageError);
  // The count itself: exact below the limit, saturated at 2^64 past it, zero with a zero among the sizes.
  const int64_t dims[] = {3, 5, 7};
  CHECK(byte_count(dims, 8) == 3 * 5 * 7 * 8);
  const int64_t huge[] = {int64_t{1} << 62, int64_t{1} << 62, int64_t{1} << 62};
  CHECK(byte_count(huge, 4) == static_cast<unsigned __int128>(1) << 64);
  const int64_t with_zero[] = {int64_t{1} << 62, int64_t{1} << 62, 0};
  CHECK(byte_count(with_zero, 2) == 0);
  CHECK(checked_nbytes(Shape{(int64_t{1} << 62) - 1}, DType::kF16) == ((uint64_t{1} << 62) - 1) * 2);  // < 2^63
}
