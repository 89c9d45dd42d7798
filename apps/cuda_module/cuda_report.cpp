#include "apps/cuda_module/cuda_report.h"

#include "layers/device/cupti/cupti_trace.h"
#include "layers/kernels/cuda/cuda_kernels.h"
#include "layers/runtime/cuda/cuda_runtime_layer.h"
#include "lib/error.h"
#include "reports/formats/notes.h"
#include "reports/model/peak_table.h"

namespace strata::cuda_module {

namespace rt = runtime::cuda;

std::string mhz(int khz) { return std::to_string(khz / 1000) + " MHz"; }

void describe_cuda_run(reports::TraceReport& report, const CudaRunSummary& run) {
  const rt::DeviceInfo info = rt::device_info(run.device.index);
  report.device = run.device.str() + " " + info.name;
  auto& env = report.env.device;
  env.emplace_back("name", info.name);
  env.emplace_back("index", run.device.str());
  env.emplace_back("SMs", std::to_string(info.sm_count));
  env.emplace_back("compute capability", std::to_string(info.cc_major) + "." + std::to_string(info.cc_minor));
  env.emplace_back("memory", format_bytes(double(info.total_bytes)) + " (" + format_bytes(double(info.free_bytes)) + " free)");
  env.emplace_back("SM clock (peak)", mhz(info.clock_khz));
  env.emplace_back("memory clock (peak)", mhz(info.memory_clock_khz));
  env.emplace_back("memory bus", std::to_string(info.memory_bus_bits) + " bit");
  env.emplace_back("PCI bus", info.pci_bus_id);
  env.emplace_back("CUDA driver", rt::cuda_version_string(info.driver_version));
  env.emplace_back("CUDA runtime", rt::cuda_version_string(info.runtime_version));
  const kernels::cuda::LibraryVersions libs = kernels::cuda::library_versions();
  env.emplace_back("cuBLAS", libs.cublas);
  env.emplace_back("cuBLASLt", libs.cublaslt);
  env.emplace_back("cuDNN", libs.cudnn);
  env.emplace_back("CUPTI", cupti::cupti_version());
  env.emplace_back("GPU timing", run.device_timing ? "CUPTI activity records" : "off: " + run.timing_off_reason);

  const reports::PeakFlops peak = reports::published_peak(info.name, info.cc_major, info.cc_minor, info.sm_count,
                                                          report.element_dtype, report.tf32);
  report.peak_flops = peak.flops;
  report.peak_source = peak.source;

  if (run.device_timing) {
    using reports::RowKind;
    report.describe(RowKind::kQueue, "", "launch call begin -> first kernel start");
    for (const reports::BreakdownRow& row : report.steady.rows) {
      if (row.kind == RowKind::kLaunch && !row.names.empty()) {
        std::string names;
        for (const std::string& n : row.names) names += (names.empty() ? "" : " > ") + n;
        report.describe(RowKind::kLaunch, "", names + " (CUPTI API records)");
      }
      if (row.kind == RowKind::kGpu && !row.names.empty()) {
        report.describe(RowKind::kGpu, "",
                        row.names.front() + (row.names.size() > 1 ? " (+" + std::to_string(row.names.size() - 1) + " more)" : ""));
      }
    }
  } else {
    const std::string na = "n/a: GPU timing is off (" + run.timing_off_reason + ")";
    for (reports::RowKind row : {reports::RowKind::kLaunch, reports::RowKind::kQueue, reports::RowKind::kGpu})
      report.describe_na(row, na);
  }

  for (const reports::Figure& f : run.figures.all()) report.figures.set(f.name, f.value, f.unit);
  for (const std::string& n : run.notes) report.notes.push_back(n);
  for (const std::string& plan : run.plans) report.notes.push_back("plan: " + plan);
  add_gemm_candidate_figures(report.figures, run.gemm_candidates);
  for (const kernels::cuda::GemmCandidateList& list : run.gemm_candidates)
    for (const std::string& line : kernels::cuda::format_candidate_table(list)) report.notes.push_back(line);
  if (std::string note = reports::unmatched_launches_note(report.figures); !note.empty()) report.notes.push_back(note);
  if (std::string note = reports::unmatched_kernels_note(report.figures); !note.empty()) report.notes.push_back(note);
  if (std::string note = reports::failed_launches_note(report.figures); !note.empty()) report.notes.push_back(note);
  if (std::string note = reports::timestamp_note(report.figures); !note.empty()) report.notes.push_back(note);
  report.notes.push_back(reports::allocator_note(report.figures));
  if (!report.peak_source.empty() && report.peak_flops == 0) report.notes.push_back("peak: " + report.peak_source);
}

void add_gemm_candidate_figures(reports::Figures& figures, const std::vector<kernels::cuda::GemmCandidateList>& lists) {
  for (size_t l = 0; l < lists.size(); ++l) {
    const kernels::cuda::GemmCandidateList& list = lists[l];
    const std::string prefix = "gemm_algos." + std::to_string(l) + ".";
    figures.set(prefix + "candidates", double(list.candidates.size()), "count");
    figures.set(prefix + "chosen", double(list.chosen), "count");
    for (size_t j = 0; j < list.candidates.size(); ++j) {
      const kernels::cuda::GemmCandidate& c = list.candidates[j];
      const std::string at = prefix + std::to_string(j) + ".";
      figures.set(at + "algo_id", c.algo_id, "count");
      figures.set(at + "tile_id", c.tile_id, "count");
      figures.set(at + "stages_id", c.stages_id, "count");
      figures.set(at + "splitk", c.splitk, "count");
      figures.set(at + "reduction_scheme", c.reduction_scheme, "count");
      figures.set(at + "workspace_bytes", double(c.workspace_bytes), "bytes");
      figures.set(at + "waves", double(c.waves), "ratio");
      if (c.time_ns >= 0) figures.set(at + "time_ns", c.time_ns, "ns");
    }
  }
}

}  // namespace strata::cuda_module
