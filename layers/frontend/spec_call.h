// The vocabulary of a spec's call (Note [An op's spec beside the frontend] in
// layers/frontend/specs/spec_format.h): what one call of an op built from "matmul 1024" is, and the conv
// options only some specs read. Nothing here knows any particular operator.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "lib/tensor.h"

namespace strata::frontend {

// The options of a spec that only conv2d and its gradients read (`--out-channels K --kernel R --stride S
// --pad P --dilation D --groups G`).
struct ConvOptions {
  std::optional<int64_t> out_channels;  // default: the input's channel count
  int64_t kernel = 3;
  int64_t stride = 1;
  int64_t pad = 0;
  int64_t dilation = 1;
  int64_t groups = 1;  // the weight is [K, C/groups, R, R]
  std::string given;  // the conv options typed on the command line ("--kernel, --pad"): refused for other ops
};

// One argument of a call built from a spec, in schema order: a tensor the frontend fills with seeded
// random values, an int or an int[] passed as it is. Arguments the spec does not give take the schema's
// default.
struct SpecArg {
  bool is_tensor = true;
  Shape shape;        // tensors; an int[]'s values
  int64_t value = 0;  // ints
  bool is_int_list = false;
  static SpecArg tensor(Shape s) { return {true, s, 0, false}; }
  static SpecArg integer(int64_t v) { return {false, {}, v, false}; }
  static SpecArg int_list(Shape values) { return {false, values, 0, true}; }
};

// What one call of an op built from a spec is: its arguments, and the figures the report needs about it.
struct SpecCall {
  std::vector<SpecArg> args;
  std::vector<Shape> outputs;  // from the op's shape rule: what the frontend sizes memory for
  // A view op's output is a header over its input's storage: the call allocates none of `outputs`, so
  // peak_bytes leaves them out (expand 90000x90000 is a view of 360 KB, not 30 GiB); what materialises
  // the output (--check's reference, --backward's gradient of it) still counts it (required_bytes).
  bool output_is_view = false;
  std::string description;  // "[1024x1024] @ [1024x1024]"
  std::string gemm_shape;   // "1024x1024x1024" (MxKxN) for GEMM-based ops, "" otherwise
  double flops = 0;         // floating-point operations of one call
  // Memory-bound ops: elements one call must read and write (bytes = this x the element size); else 0.
  double elements_moved = 0;
  // Elements of workspace the largest backend needs beside inputs and output (the CPU conv's im2col
  // columns of one image), as sizes so that the frontend multiplies them overflow-checked.
  std::vector<int64_t> workspace_dims;
};

}  // namespace strata::frontend
