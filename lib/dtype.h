#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace strata {

enum class DType : uint8_t { kF32, kF64, kF16, kBF16 };

inline constexpr DType kAllDTypes[] = {DType::kF32, DType::kF64, DType::kF16, DType::kBF16};

size_t element_size(DType dtype);
std::string_view dtype_name(DType dtype);  // "f32", "f64", "f16", "bf16"
std::optional<DType> parse_dtype(std::string_view text);

}  // namespace strata
