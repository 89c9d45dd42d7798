#include "lib/device.h"

namespace strata {

std::string Device::str() const {
  if (is_cpu()) return "cpu";
  return "cuda:" + std::to_string(index);
}

}  // namespace strata
