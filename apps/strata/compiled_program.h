// A program's forward through the compiled path (layers/compiler), for `strata trace PROGRAM --mode
// compiled` (program_command.cpp) and the compiled column of `strata compare PROGRAM` (compiled_column.cpp).
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "apps/strata/prepared_trace.h"
#include "layers/compiler/compiler.h"
#include "layers/compiler/compiler_cuda.h"
#include "layers/compiler/sass.h"
#include "layers/frontend/sequence.h"
#include "measure/device_session.h"
#include "reports/model/comparison.h"
#include "reports/model/compiled_attribution.h"
#include "reports/model/report.h"

namespace strata::app {

// --emit ptx: the compiled graph's kernels as the GPU code they would become (compiler_cuda.h).
struct PtxListing {
  std::string arch;       // "sm_90"
  std::string arch_note;  // how the architecture was chosen: "--arch", the GPU's, or the default and why
  std::vector<compiler::cuda::PtxKernel> kernels;
  bool sass = false;  // --emit sass: the listing is the SASS, not the CUDA C and PTX
  std::vector<compiler::Disassembly> disassembly;  // with sass, one per kernel, in the same order
};

struct CompiledProgram {
  compiler::Captured captured;
  std::optional<compiler::CompiledGraph> graph;
  std::vector<Tensor> inputs;  // the program's input; its parameters are the graph's constants
  std::optional<PtxListing> ptx;
  std::string gpu_arch_note;  // compiled for a GPU: how the PTX's architecture was chosen; "" on the CPU
};

// Captures one forward of `sequence` (its input the graph's input) and compiles it, each phase in a zone
// of the active timeline. Throws CompilerUnavailableError (exit 4) when there is no C++ compiler.
CompiledProgram compile_program(frontend::Sequence& sequence);

// --emit ptx: fills program.ptx through the PTX module (Note [The PTX module]) for `arch`, or when it is
// "" for the GPU's architecture, else sm_90. UnavailableError (exit 4) in a build without the CUDA toolkit.
// With `sass` (--emit sass) each kernel's cubin is disassembled too (compiler::disassemble_cubin); without
// ptxas or a disassembler that is UnavailableError as well, its message holding ptxas's figures when
// ptxas ran and saying where to get cuobjdump or nvdisasm.
void emit_program_ptx(CompiledProgram& program, const std::string& arch, bool sass = false);

// The rows' words and the compiled figures (ops called, kernels run, bytes, cache), and with --check the
// compiled result against eager's as well as against the float64 reference.
void describe_compiled(reports::TraceReport& report, const CompiledProgram& program,
                       const TraceOptions& options);
// The captured graph, the fusion plan, with `emit` every generated kernel's source, and with program.ptx
// each kernel's CUDA C, PTX and ptxas line.
void print_compiled_listing(const CompiledProgram& program, bool emit, std::ostream& out);
nlohmann::json compiled_json(const CompiledProgram& program, bool emit);

// On a GPU: tags each fused kernel's device work with its step tag (Note [Compiled kernels attributed to
// their group] in reports/model/compiled_attribution.h). `forward` numbers the forward being run (each of
// K captured into one graph); it stays 0 where every forward is a call of its own.
class StepTagger : public compiler::StepObserver {
 public:
  StepTagger(measure::DeviceSession& session, size_t groups) : session_(session), groups_(groups) {}
  void begin(size_t kernel) override { session_.begin_step(reports::step_tag(forward, kernel, groups_)); }
  void end() override { session_.end_step(); }
  size_t forward = 0;

 private:
  measure::DeviceSession& session_;
  size_t groups_;
};

// The kernels whose launch was tagged with one of `ops` (a trace's timed calls), as indices into
// device.kernels.
std::vector<size_t> kernels_of_ops(const DeviceTrace& device, const std::vector<uint32_t>& ops);
// Per fused kernel of the plan ("k0  fused_add_relu <- add relu"), its device kernels, their time and
// names, and the kernels attributed to none; and the same as JSON.
void print_kernel_attribution(const CompiledProgram& program, const reports::CompiledAttribution& attribution,
                              std::ostream& out);
nlohmann::json kernel_attribution_json(const CompiledProgram& program,
                                       const reports::CompiledAttribution& attribution);

// `strata compare PROGRAM`: the compiled column beside eager and graph replay, per forward. On a GPU the
// compiled forwards are captured into a CUDA Graph and replayed (Note [The compiled column on a GPU] in
// compiled_column.cpp).
struct CompiledColumn {
  std::string unavailable;  // why there is no compiled column ("" when there is one)
  std::optional<CompiledProgram> program;
  reports::ModeFigures figures;  // per forward (k = forwards per round)
  std::vector<std::vector<uint32_t>> ids;
  int64_t begin = 0, end = 0;
  binding::IValue out;
  // On a GPU: the K captured compiled forwards' op ids (each replayed kernel is attributed to one), the
  // capture's cost, and how many replayed kernels were attributed to them (attribute_compiled_replay).
  std::vector<uint32_t> capture_ids;
  measure::CaptureCost capture;
  std::string replay_kind;  // "CUDA Graph" on a GPU, "" on the CPU (the compiled forwards run as they are)
  size_t replayed_kernels = 0, attributed_kernels = 0;
  // On a GPU: each replayed kernel's fused kernel (Note [Compiled kernels attributed to their group]).
  std::optional<reports::CompiledAttribution> groups;
};
CompiledColumn run_compiled_column(const Prepared& prepared, int64_t forwards_per_round, size_t rounds,
                                   int64_t warmup, Timeline& timeline, uint32_t& next_id);
// On a GPU, after the session's records are in the timeline: which of `attribution`'s replayed kernels ran
// from the compiled column's graph (attributed to its capture ids, or replayed inside its window); they
// are taken out of `attribution`, which then describes the eager replay alone, and each is attributed to
// its fused kernel (column.groups). Nothing on the CPU.
void attribute_compiled_replay(CompiledColumn& column, const DeviceTrace& device, reports::GraphAttribution& attribution);
// The three-way table (ops called, kernels run, bytes, host tax, wall, break-even) and its JSON. `steps`:
// ops per forward; `recorded`: kernel calls in the replay's CPU plan (0 for a CUDA Graph, whose are not
// counted).
void print_three_way(const reports::Comparison& comparison, const CompiledColumn& column, size_t steps,
                     size_t recorded, std::ostream& out);
nlohmann::json three_way_json(const reports::Comparison& comparison, const CompiledColumn& column,
                              size_t steps, size_t recorded);

}  // namespace strata::app
