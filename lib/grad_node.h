// A recorded backward node (the autograd graph). The Autograd dispatch key creates these; concrete
// nodes (MmBackward, ...) live in layers/dispatch/autograd. lib only knows the shape of one.
#pragma once

#include <vector>

namespace strata {

class Tensor;

class GradNode {
 public:
  virtual ~GradNode() = default;
  virtual const char* name() const = 0;  // "MmBackward"
  virtual size_t num_saved() const = 0;  // tensors saved for the backward pass
};

}  // namespace strata
