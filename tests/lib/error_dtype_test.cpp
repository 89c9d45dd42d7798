#include <doctest/doctest.h>

#include "lib/dtype.h"
#include "lib/error.h"

using namespace strata;

TEST_CASE("exit codes are the documented ones (README, docs/errors.md)") {
  CHECK(static_cast<int>(ExitCode::kOk) == 0);
  CHECK(static_cast<int>(ExitCode::kFailure) == 1);
  CHECK(static_cast<int>(ExitCode::kUsage) == 2);
  CHECK(static_cast<int>(ExitCode::kCheckFailed) == 3);
  CHECK(static_cast<int>(ExitCode::kUnavailable) == 4);
  CHECK(static_cast<int>(ExitCode::kInterrupted) == 130);
  CHECK(UsageError("x").code() == ExitCode::kUsage);
  CHECK(UnavailableError("x").code() == ExitCode::kUnavailable);
  CHECK(Error("x").code() == ExitCode::kFailure);
  CHECK(Error("x", ExitCode::kInterrupted).code() == ExitCode::kInterrupted);
}

TEST_CASE("format_bytes: bytes, then binary units with two decimals") {
  CHECK(format_bytes(0) == "0 B");
  CHECK(format_bytes(1023) == "1023 B");
  CHECK(format_bytes(1024) == "1.00 KiB");
  CHECK(format_bytes(1536) == "1.50 KiB");
  CHECK(format_bytes(1024.0 * 1024 * 1024 * 1.5) == "1.50 GiB");
  CHECK(format_bytes(1024.0 * 1024 * 1024 * 1024 * 1024 * 1.07) == "1.07 PiB");
  CHECK(format_bytes(9.3e18) == "8.07 EiB");
}

TEST_CASE("dtypes: sizes, names, and parsing round-trips") {
  CHECK(element_size(DType::kF32) == 4);
  CHECK(element_size(DType::kF64) == 8);
  CHECK(element_size(DType::kF16) == 2);
  CHECK(element_size(DType::kBF16) == 2);
  for (DType d : kAllDTypes) CHECK(parse_dtype(dtype_name(d)) == d);
  CHECK_FALSE(parse_dtype("float32").has_value());
  CHECK_FALSE(parse_dtype("F32").has_value());
  CHECK_FALSE(parse_dtype("").has_value());
}
