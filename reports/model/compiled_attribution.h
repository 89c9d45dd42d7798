// Role: model.
// Which fused kernel of a compiled forward each device kernel ran for, from the step tags the session
// recorded (DeviceTrace::step_tags, GraphNodeOrigin::step_tag). Plain structs: tested with synthetic
// records on any machine.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "lib/timeline.h"

namespace strata::reports {

// Note [Compiled kernels attributed to their group]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A compiled forward on a GPU is one op to the session: its kernels (NVRTC's fused kernels, cuBLAS's and
// cuBLASLt's GEMMs, a GEMM's generated epilogue) all carry the forward's op id, which says nothing about
// which of the plan's fused kernels (k0 fused_add_relu <- add relu, as the plan lists them) launched
// them. So around each fused kernel's call the compiled graph tells its observer (compiler::StepObserver)
// and the session pushes a step tag of a second kind (CUPTI's CUSTOM1 external correlation; the op's
// CUSTOM0 tag stays, and every join by op with it). A kernel launched directly (trace --mode compiled)
// finds its tag through its launch's correlation id; a kernel replayed from a CUDA Graph (compare's
// compiled column) through its graph node, whose creation the tag was pushed around at capture (a clone
// inherits its original's tag). The tag numbers the forward too, so K forwards captured into one graph
// stay apart. A kernel with no tag, or a tag no forward was given, is counted unattributed, never dropped:
// a fallback node (GraphNodeSource::kCaptureInfo, created with no callback) or a lost CUSTOM1 record.
uint32_t step_tag(size_t forward, size_t group, size_t groups);  // 1 + forward * groups + group; 0 is none

struct GroupKernels {  // one fused kernel of the plan
  size_t kernels = 0;              // device kernels attributed to it, over every forward
  double gpu_ns = 0;               // their durations, summed
  std::vector<std::string> names;  // the distinct device kernels' names, first seen first
};

struct CompiledAttribution {
  size_t kernels = 0;     // the device kernels considered (a compiled run's)
  size_t attributed = 0;  // of those, mapped to a fused kernel of a forward
  std::vector<GroupKernels> groups;                // per fused kernel of the plan, in plan order
  std::vector<std::string> unattributed_names;     // the distinct names of those not mapped
  std::vector<int64_t> group_of_kernel;            // per considered kernel: its group, -1 when none
  std::vector<int64_t> forward_of_kernel;          // per considered kernel: its forward, -1 when none
  size_t unattributed() const { return kernels - attributed; }
};

// `kernels`: indices into device.kernels, the compiled run's kernels; `groups`: the plan's fused kernels;
// `forwards`: how many forwards were given tags (K captured into one graph, or 1 when each call of a
// forward runs it directly).
CompiledAttribution attribute_compiled_kernels(const DeviceTrace& device, const std::vector<size_t>& kernels,
                                               size_t groups, size_t forwards);

}  // namespace strata::reports
