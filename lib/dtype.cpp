#include "lib/dtype.h"

namespace strata {

size_t element_size(DType dtype) {
  switch (dtype) {
    case DType::kF32: return 4;
    case DType::kF64: return 8;
    case DType::kF16: return 2;
    case DType::kBF16: return 2;
  }
  return 0;
}

std::string_view dtype_name(DType dtype) {
  switch (dtype) {
    case DType::kF32: return "f32";
    case DType::kF64: return "f64";
    case DType::kF16: return "f16";
    case DType::kBF16: return "bf16";
  }
  return "?";
}

std::optional<DType> parse_dtype(std::string_view text) {
  for (DType d : kAllDTypes) {
    if (dtype_name(d) == text) return d;
  }
  return std::nullopt;
}

}  // namespace strata
