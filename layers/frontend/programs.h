// Named programs: a few ops in a row named like an op, the workloads of the compiled path
// (docs/compiled.md): `relu_matmul N` is relu(matmul(a, b)), `linear_gelu BxINxOUT` is gelu(linear(x, W,
// b)), `gelu_tanh N` is the tanh GELU in eight pointwise calls. Each is a Sequence (Note [Sequences are not
// operators]): every step a real call, so eager, replay and compiled runs of it are the same calls. Private
// to layers/frontend: sequence.h is the surface, and dispatches to these by name.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "layers/frontend/sequence.h"

namespace strata::frontend {

bool is_program(std::string_view name);
std::string program_help();  // lines for sequence_help()

// Parses the program's sizes with its GEMM's own op spec (matmul's, linear's), so that every size rule
// and message is that op's; the message names the program.
SequenceSpec parse_program_spec(std::string_view name, std::string_view dims);
// The peak of one forward: inputs, parameters, every step's output, and on the CPU the f32 copies a
// bf16/f16 step widens to. Overflow-checked like required_bytes.
size_t program_bytes(const SequenceSpec& spec, DType given, DType computed, const Device& device);
Sequence prepare_program(const SequenceSpec& spec, DType dtype, Device device, uint64_t seed,
                         bool requires_grad, size_t available_bytes);
std::vector<double> program_reference(const Sequence& sequence);

// Like random_tensor, with the values scaled by `scale` before they are rounded to `dtype` (sequence.cpp).
Tensor scaled_random(const Shape& shape, DType dtype, Device device, uint64_t seed, double scale);

}  // namespace strata::frontend
