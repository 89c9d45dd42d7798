// reports/model/compiled_attribution: device kernels of compiled forwards mapped to the plan's fused
// kernels from synthetic records (step tags through launch correlation or graph node), as CUPTI would
// deliver them on a GPU.
#include <doctest/doctest.h>

#include "reports/model/compiled_attribution.h"

namespace strata {
namespace {

KernelRecord kernel(const std::string& name, uint32_t correlation, uint64_t node, int64_t start, int64_t end) {
  KernelRecord k;
  k.name = name;
  k.correlation_id = correlation;
  k.graph_node_id = node;
  k.start_ns = start;
  k.end_ns = end;
  return k;
}

std::vector<size_t> all_of(const DeviceTrace& trace) {
  std::vector<size_t> all;
  for (size_t i = 0; i < trace.kernels.size(); ++i) all.push_back(i);
  return all;
}

}  // namespace

TEST_CASE("step tags number each forward's fused kernels from 1") {
  CHECK(reports::step_tag(0, 0, 3) == 1);
  CHECK(reports::step_tag(0, 2, 3) == 3);
  CHECK(reports::step_tag(1, 0, 3) == 4);
}

TEST_CASE("directly launched kernels: each through its launch's step tag, a GEMM and its epilogue together") {
  // Plan: k0 fused_matmul_relu (GEMM-epilogue: cuBLAS's GEMM, then the generated epilogue), k1 fused_add_relu.
  DeviceTrace trace;
  trace.kernels = {kernel("sm90_xmma_gemm_f32f32", 10, 0, 100, 150), kernel("fused_matmul_relu", 11, 0, 150, 160),
                   kernel("fused_add_relu", 12, 0, 160, 170)};
  trace.step_tags = {{10, reports::step_tag(0, 0, 2)}, {11, reports::step_tag(0, 0, 2)}, {12, reports::step_tag(0, 1, 2)}};
  const reports::CompiledAttribution a = reports::attribute_compiled_kernels(trace, all_of(trace), 2, 1);
  CHECK(a.kernels == 3);
  CHECK(a.attributed == 3);
  CHECK(a.unattributed() == 0);
  REQUIRE(a.groups.size() == 2);
  CHECK(a.groups[0].kernels == 2);
  CHECK(a.groups[0].gpu_ns == 60);
  CHECK(a.groups[0].names == std::vector<std::string>{"sm90_xmma_gemm_f32f32", "fused_matmul_relu"});
  CHECK(a.groups[1].kernels == 1);
  CHECK(a.groups[1].names == std::vector<std::string>{"fused_add_relu"});
  CHECK(a.group_of_kernel == std::vector<int64_t>{0, 0, 1});
  CHECK(a.forward_of_kernel == std::vector<int64_t>{0, 0, 0});
}

TEST_CASE("K = 2 forwards replayed from one graph: each kernel to its forward and group through its node") {
  DeviceTrace trace;
  // Capture made nodes 1..4 (two forwards of two groups); instantiation cloned them as 11..14. Replayed
  // kernels carry the clones' ids and the graph launch's correlation id (99), which has no step tag.
  for (uint32_t f = 0; f < 2; ++f) {
    for (uint32_t g = 0; g < 2; ++g) {
      const uint64_t node = 1 + f * 2 + g;
      trace.graph_nodes.push_back({node, 7 + f, GraphNodeSource::kResourceCallback, reports::step_tag(f, g, 2)});
      trace.graph_nodes.push_back({node + 10, 7 + f, GraphNodeSource::kResourceCallback, reports::step_tag(f, g, 2)});
    }
  }
  trace.step_tags = {{99, reports::step_tag(1, 1, 2)}};  // a stray tag on the launch's id must not be used
  for (uint64_t node = 11; node <= 14; ++node)
    trace.kernels.push_back(kernel(node % 2 == 1 ? "fused_add_relu" : "fused_gelu", 99, node, 0, 10));
  const reports::CompiledAttribution a = reports::attribute_compiled_kernels(trace, all_of(trace), 2, 2);
  CHECK(a.attributed == 4);
  CHECK(a.group_of_kernel == std::vector<int64_t>{0, 1, 0, 1});
  CHECK(a.forward_of_kernel == std::vector<int64_t>{0, 0, 1, 1});
  CHECK(a.groups[0].kernels == 2);
  CHECK(a.groups[1].kernels == 2);
}

TEST_CASE("a kernel with no tag, or a tag beyond the forwards given, is counted unattributed, not dropped") {
  DeviceTrace trace;
  trace.kernels = {kernel("fused_add_relu", 1, 0, 0, 5), kernel("unknown_kernel", 2, 0, 5, 9),
                   kernel("from_a_fallback_node", 3, 40, 9, 12), kernel("stray", 4, 0, 12, 13),
                   kernel("not_considered", 5, 0, 13, 14)};
  trace.step_tags = {{1, reports::step_tag(0, 0, 1)}, {4, reports::step_tag(3, 0, 1)}};
  trace.graph_nodes = {{40, 7, GraphNodeSource::kCaptureInfo, 0}};  // made with no callback: no step tag
  const reports::CompiledAttribution a = reports::attribute_compiled_kernels(trace, {0, 1, 2, 3, 17}, 1, 1);
  CHECK(a.kernels == 4);  // index 17 is no kernel of the trace; index 4 was not asked for
  CHECK(a.attributed == 1);
  CHECK(a.unattributed() == 3);
  CHECK(a.unattributed_names == std::vector<std::string>{"unknown_kernel", "from_a_fallback_node", "stray"});
  CHECK(a.group_of_kernel == std::vector<int64_t>{0, -1, -1, -1});
}

}  // namespace strata
