// A program through the compiled path: capture, compile, and how a trace reports it (compiled_program.h).
#include "apps/strata/compiled_program.h"

#include <stdlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "layers/kernels/reference/reference.h"
#ifdef STRATA_WITH_CUDA
#include "measure/devices/cuda_module.h"
#include "apps/strata/ptx_module.h"
#endif
#include "lib/host_clock.h"
#include "lib/zone.h"

namespace strata::app {
namespace {

#ifdef STRATA_WITH_CUDA
// The architecture NVRTC generates for on this GPU: its own when strata knows it, else the newest strata
// knows below it (PTX is forward compatible: the driver's JIT compiles it for the GPU at load), and why.
std::string ptx_arch_for_gpu(const std::string& gpu, std::string& note) {
  const std::vector<std::string>& known = compiler::cuda::known_archs();
  if (std::find(known.begin(), known.end(), gpu) != known.end()) {
    note = "this machine's GPU";
    return gpu;
  }
  std::string best = known.front();
  const int cc = gpu.size() > 3 ? std::atoi(gpu.c_str() + 3) : 0;
  for (const std::string& a : known)
    if (std::atoi(a.c_str() + 3) <= cc) best = a;
  note = "this GPU is " + (gpu.empty() ? std::string("unknown") : gpu) + ", which strata does not generate for: the "
         "driver JIT-compiles " + best + "'s PTX for it";
  return best;
}
#endif

// Note [The compiled graph on a GPU] (layers/compiler/compiled_graph.cpp): each generated kernel's CUDA C
// through NVRTC (the PTX module), then the CUDA module's device kernel for it.
void set_gpu_kernels(compiler::CompileOptions& options, Device device, std::string& arch_note) {
#ifdef STRATA_WITH_CUDA
  const StrataPtxModule& ptx = require_ptx_module();
  const StrataCudaBackend& cuda = measure::require_cuda_backend();
  std::string why;
  // The device the graph runs on: on a machine with GPUs of several architectures, device 0's PTX may be
  // newer than this one can load.
  const std::string arch = ptx_arch_for_gpu(ptx.gpu_arch(device.index, why), arch_note);
  options.device_kernel = [&ptx, &cuda, arch, device](const compiler::Graph& g, const compiler::FusedKernel& k,
                                                      DType dtype) {
    StrataCompiledKernelRequest request;
    const uint64_t t0 = host_clock::ticks();
    compiler::cuda::Ptx compiled = ptx.kernel_ptx(g, k, dtype, arch);
    // NVRTC's time, or on a PTX cache hit the file's reading: the compile row's, as the CPU path reports
    // its own hits (Note [The PTX cache] in layers/compiler/nvrtc.cpp).
    request.nvrtc_ns = host_clock::elapsed_ns(t0);
    request.ptx = std::move(compiled.ptx);
    request.graph = &g;
    request.kernel = &k;
    request.dtype = dtype;
    request.arch = arch;
    request.device = device;
    compiler::DeviceKernel kernel = cuda.compiled_kernel(request);
    compiler::DeviceKernelInfo& info = kernel.info;
    info.ptx_cache_hit = compiled.cache_hit;
    info.ptx_path = compiled.path;
    info.ptx_key = compiled.key;
    info.ptx_refused = compiled.refused;
    info.cache_dir = compiled.cache_dir;
    info.cache_note = compiled.cache_note;
    return kernel;
  };
#else
  (void)options;
  (void)arch_note;
  throw UnavailableError("--mode compiled on " + device.str() + " needs the CUDA layers, and this strata was built "
                         "without them (docs/build.md)");
#endif
}

}  // namespace

CompiledProgram compile_program(frontend::Sequence& sequence) {
  CompiledProgram p;
  p.inputs = {sequence.input};
  const compiler::Function fn = [&](const std::vector<Tensor>&) {
    // The forward's steps hold the input itself (step 0's argument), which capture sees as input 0.
    return std::vector<Tensor>{sequence.forward().tensor()};
  };
  {
    STRATA_ZONE(zone, Layer::kFrontend, "capture (one eager forward, recorded)");
    p.captured = compiler::capture(fn, p.inputs);
  }
  compiler::CompileOptions options;
  if (sequence.input.device().is_cuda()) set_gpu_kernels(options, sequence.input.device(), p.gpu_arch_note);
  STRATA_ZONE(zone, Layer::kFrontend, "compile (fusion, codegen, compiler, load)");
  p.graph = compiler::compile(p.captured, options);
  return p;
}

void describe_compiled(reports::TraceReport& rep, const CompiledProgram& p, const TraceOptions& o) {
  const compiler::CompiledGraph& g = *p.graph;
  const size_t kernels = g.plan().kernels.size();
  using reports::RowKind;
  rep.describe(RowKind::kBinding, "",
               "guards: " + std::to_string(p.inputs.size()) + " input(s) against what was compiled");
  for (const reports::BreakdownRow& row : rep.steady.rows) {
    if (row.kind == RowKind::kDispatch) {
      rep.describe(RowKind::kDispatch, row.key,
                   row.key + ": key set + table lookup per fused kernel (" + std::to_string(kernels) + ")");
    }
  }
  std::string lib;
  for (const reports::BreakdownRow& row : rep.steady.rows)
    if (row.kind == RowKind::kLibrary)
      for (const std::string& n : row.names) lib += (lib.empty() ? "" : " + ") + n;
  rep.describe(RowKind::kLibrary, "", lib + ", output allocs");
  const compiler::CompileTimings& t = g.timings();
  rep.figures.set("compiled.ops_called", double(g.graph().calls()), "count");
  rep.figures.set("compiled.kernels_run", double(kernels), "count");
  rep.figures.set("compiled.bytes_moved", g.bytes_moved(), "bytes");
  rep.figures.set("compiled.eager_bytes_moved", compiler::eager_bytes_moved(g.graph()), "bytes");
  rep.figures.set("compiled.cache_hits", double(t.cache_hits), "count");
  rep.figures.set("compiled.cache_misses", double(t.cache_misses), "count");
  if (!p.gpu_arch_note.empty()) {
    rep.notes.push_back("compiled for the GPU: " + std::to_string(g.graph().calls()) + " ops in " +
                        std::to_string(kernels) + " kernel" + (kernels == 1 ? "" : "s") + "; generated kernels as PTX for " +
                        (g.builds().empty() ? std::string("-") : g.builds().front().device->arch) + " (" +
                        p.gpu_arch_note + "), loaded by the driver; PTX cache " + t.cache_dir + " (" +
                        std::to_string(t.cache_hits) + " hit" + (t.cache_hits == 1 ? "" : "s") + ", " +
                        std::to_string(t.cache_misses) + " compiled by NVRTC)" +
                        (t.cache_note.empty() ? "" : "; " + t.cache_note));
  } else {
    rep.notes.push_back("compiled: " + std::to_string(g.graph().calls()) + " ops in " + std::to_string(kernels) +
                        " kernel" + (kernels == 1 ? "" : "s") + "; kernel cache " + t.cache_dir + " (" +
                        std::to_string(t.cache_hits) + " hit" + (t.cache_hits == 1 ? "" : "s") + ", " +
                        std::to_string(t.cache_misses) + " compiled)" + (t.cache_note.empty() ? "" : "; " + t.cache_note));
  }
  if (!o.check) return;
  // The compiled result must be eager's to rounding: against the eager output capture produced as well.
  const Tensor out = g.run(p.inputs)[0];
  const double vs_eager = reference::relative_error(out, reference::to_double(p.captured.eager_outputs[0]));
  rep.figures.set("check.compiled_vs_eager_relative_error", vs_eager, "ratio");
  if (vs_eager > rep.check.tolerance && rep.check.passed()) rep.check.relative_error = vs_eager;
  char text[160];
  std::snprintf(text, sizeof text,
                "check: compiled vs float64 reference %.2e, compiled vs eager %.2e (tolerance %.0e)",
                rep.check.relative_error, vs_eager, rep.check.tolerance);
  rep.notes.push_back(text);
}

#ifdef STRATA_WITH_CUDA
namespace {

// A fresh directory under the temporary one ("<tmp>/strata-sass-XXXXXX").
std::string temp_directory(const std::string& prefix) {
  std::string pattern = (std::filesystem::temp_directory_path() / (prefix + "-XXXXXX")).string();
  if (::mkdtemp(pattern.data()) == nullptr) throw Error("mkdtemp " + pattern + ": " + std::strerror(errno));
  return pattern;
}

// --emit sass: each kernel's cubin through cuobjdump (or nvdisasm). Without ptxas there is no cubin, and
// without a disassembler no listing: both are UnavailableError (exit 4), the second with ptxas's figures,
// which are all there is to say about the kernels then.
void disassemble(PtxListing& l) {
  std::string figures;
  for (const compiler::cuda::PtxKernel& k : l.kernels) {
    if (!k.ptxas.ran) {
      throw UnavailableError("--emit sass assembles the PTX with ptxas, and there is none: " + k.ptxas.why_not);
    }
    for (const compiler::cuda::PtxasResources& f : k.ptxas.functions) figures += "\n  ptxas " + f.str();
  }
  const std::string dir = temp_directory("strata-sass");
  try {
    for (const compiler::cuda::PtxKernel& k : l.kernels) {
      const std::string cubin = dir + "/" + k.kernel.name + "." + l.arch + ".cubin";
      std::ofstream(cubin, std::ios::binary) << k.ptxas.cubin;
      l.disassembly.push_back(compiler::disassemble_cubin(cubin));
    }
  } catch (const UnavailableError& e) {
    std::filesystem::remove_all(dir);
    throw UnavailableError(std::string("--emit sass: ") + e.what() + "\nptxas assembled the kernels for " +
                           l.arch + " (no listing without a disassembler):" + figures);
  } catch (...) {
    std::filesystem::remove_all(dir);
    throw;
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
#endif

void emit_program_ptx(CompiledProgram& p, const std::string& arch, bool sass) {
  if (!arch.empty()) compiler::cuda::check_arch(arch);
#ifdef STRATA_WITH_CUDA
  const StrataPtxModule& m = require_ptx_module();
  PtxListing l;
  if (!arch.empty()) {
    l.arch = arch;
    l.arch_note = "--arch";
  } else {
    std::string why;
    // The GPU the program runs on when it runs on one, else device 0 ("this machine's GPU").
    const int device = !p.inputs.empty() && p.inputs[0].device().is_cuda() ? p.inputs[0].device().index : 0;
    const std::string gpu = m.gpu_arch(device, why);
    const auto& known = compiler::cuda::known_archs();
    l.arch = "sm_90";
    if (gpu.empty()) {
      l.arch_note = "the default: " + why + "; --arch names another";
    } else if (std::find(known.begin(), known.end(), gpu) == known.end()) {
      l.arch_note = "the default: this GPU is " + gpu + ", which strata does not generate for; --arch names another";
    } else {
      l.arch = gpu;
      l.arch_note = "this machine's GPU";
    }
  }
  l.kernels = m.emit_ptx(*p.graph, l.arch, sass);
  l.sass = sass;
  if (sass) disassemble(l);
  p.ptx = std::move(l);
#else
  (void)p;
  throw UnavailableError(std::string("--emit ") + (sass ? "sass" : "ptx") +
                         " needs the CUDA toolkit's NVRTC, and this strata was built without the CUDA layers "
                         "(docs/build.md); --emit cpp works in every build");
#endif
}

namespace {

// "fused_add_relu sm_90: 28 instructions: fp32 1, ld.global 2, st.global 1, ..." (the classes it has).
std::string mix_line(const compiler::SassFunction& f) {
  const compiler::SassMix mix = compiler::instruction_mix(f);
  std::string line = f.demangled + " " + f.arch + ": " + std::to_string(mix.total) + " instructions:";
  const char* sep = " ";
  for (int c = 0; c < compiler::kSassClassCount; ++c) {
    const int64_t n = mix.counts[static_cast<size_t>(c)];
    if (n == 0) continue;
    line += sep + std::string(compiler::sass_class_name(static_cast<compiler::SassClass>(c))) + " " +
            std::to_string(n);
    sep = ", ";
  }
  return line;
}

void print_sass(const PtxListing& l, std::ostream& out) {
  out << "generated SASS (--emit sass) for " << l.arch << " (" << l.arch_note << "):\n";
  for (size_t i = 0; i < l.kernels.size() && i < l.disassembly.size(); ++i) {
    const compiler::Disassembly& d = l.disassembly[i];
    out << "-- " << l.kernels[i].kernel.name << ".sass (" << d.tool << ")\n" << d.listing;
    if (!d.listing.empty() && d.listing.back() != '\n') out << "\n";
  }
  for (const compiler::cuda::PtxKernel& k : l.kernels) {
    for (const compiler::cuda::PtxasResources& f : k.ptxas.functions) out << "ptxas " << f.str() << "\n";
  }
  for (const compiler::Disassembly& d : l.disassembly) {
    for (const compiler::SassFunction& f : d.functions) out << "sass " << mix_line(f) << "\n";
  }
}

void print_ptx(const PtxListing& l, std::ostream& out) {
  if (l.sass) {
    print_sass(l, out);
    return;
  }
  out << "generated CUDA C and PTX (--emit ptx) for " << l.arch << " (" << l.arch_note << "):\n";
  for (const compiler::cuda::PtxKernel& k : l.kernels) {
    out << "-- " << k.kernel.name << ".cu\n" << k.kernel.source;
    if (!k.ptx.log.empty()) out << "-- NVRTC log\n" << k.ptx.log << "\n";
    out << "-- " << k.kernel.name << ".ptx (" << (k.ptx.cache_hit ? "PTX cache hit: " : "NVRTC, cached as ")
        << k.ptx.path << (k.ptx.refused.empty() ? "" : "; the cached file was refused: " + k.ptx.refused) << ")\n"
        << k.ptx.ptx;
    if (!k.ptx.ptx.empty() && k.ptx.ptx.back() != '\n') out << "\n";
  }
  for (const compiler::cuda::PtxKernel& k : l.kernels) {
    if (!k.ptxas.ran) {
      out << "ptxas " << k.kernel.name << ": not run: " << k.ptxas.why_not << "\n";
      continue;
    }
    for (const compiler::cuda::PtxasResources& f : k.ptxas.functions) out << "ptxas " << f.str() << "\n";
  }
}

nlohmann::json ptx_json(const PtxListing& l) {
  nlohmann::json kernels = nlohmann::json::array();
  for (const compiler::cuda::PtxKernel& k : l.kernels) {
    nlohmann::json functions = nlohmann::json::array();
    for (const compiler::cuda::PtxasResources& f : k.ptxas.functions) {
      functions.push_back({{"function", f.function},
                           {"arch", f.arch},
                           {"registers", f.registers},
                           {"shared_bytes", f.shared_bytes},
                           {"stack_frame_bytes", f.stack_frame_bytes},
                           {"spill_store_bytes", f.spill_store_bytes},
                           {"spill_load_bytes", f.spill_load_bytes},
                           {"barriers", f.barriers}});
    }
    nlohmann::json sass = nullptr;
    if (const size_t i = kernels.size(); i < l.disassembly.size()) {
      nlohmann::json fs = nlohmann::json::array();
      for (const compiler::SassFunction& f : l.disassembly[i].functions) {
        const compiler::SassMix mix = compiler::instruction_mix(f);
        nlohmann::json counts = nlohmann::json::object();
        for (int c = 0; c < compiler::kSassClassCount; ++c) {
          counts[compiler::sass_class_name(static_cast<compiler::SassClass>(c))] = mix.counts[static_cast<size_t>(c)];
        }
        fs.push_back({{"function", f.name}, {"arch", f.arch}, {"instructions", mix.total}, {"mix", counts}});
      }
      sass = {{"tool", l.disassembly[i].tool}, {"listing", l.disassembly[i].listing}, {"functions", fs}};
    }
    kernels.push_back({{"name", k.kernel.name},
                       {"dtype", dtype_name(k.kernel.dtype)},
                       {"cuda_source", k.kernel.source},
                       {"ptx", k.ptx.ptx},
                       {"nvrtc_log", k.ptx.log},
                       {"cache", {{"hit", k.ptx.cache_hit}, {"key", k.ptx.key}, {"path", k.ptx.path},
                                  {"refused", k.ptx.refused}, {"nvrtc_ns", k.ptx.compile_ns}, {"read_ns", k.ptx.read_ns}}},
                       {"ptxas", {{"ran", k.ptxas.ran}, {"why_not", k.ptxas.why_not}, {"functions", functions}}},
                       {"sass", sass}});
  }
  return {{"arch", l.arch}, {"arch_note", l.arch_note}, {"kernels", kernels}};
}

// On a GPU, per generated kernel: how it ran, and for a loaded PTX what the driver made of it.
void print_gpu_kernels(const compiler::CompiledGraph& g, std::ostream& out) {
  for (const compiler::KernelBuild& b : g.builds()) {
    if (!b.device) continue;
    const compiler::DeviceKernelInfo& d = *b.device;
    out << "gpu " << b.name << ": " << d.path << "; cuBLASLt epilogue: " << d.epilogue << " (" << d.epilogue_why
        << ")\n";
    if (!d.ptx_key.empty()) {
      out << "gpu " << b.name << " PTX: " << (d.ptx_cache_hit ? "cache hit, " : "compiled by NVRTC into ") << d.ptx_path
          << (d.ptx_refused.empty() ? "" : " (the cached file was refused: " + d.ptx_refused + ")") << "\n";
    }
    if (d.ptx_loaded) {
      out << "gpu " << b.name << " " << d.arch << " PTX, JIT-compiled by the driver: binary version "
          << d.binary_version << ", PTX version " << d.ptx_version << "\n";
    }
  }
}

}  // namespace

void print_compiled_listing(const CompiledProgram& p, bool emit, std::ostream& out) {
  out << "captured " << p.captured.graph.str() << p.graph->plan().str(p.graph->graph());
  print_gpu_kernels(*p.graph, out);
  if (emit) out << "generated source (--emit cpp):\n" << p.graph->emit_cpp();
  if (p.ptx) print_ptx(*p.ptx, out);
}

nlohmann::json compiled_json(const CompiledProgram& p, bool emit) {
  const compiler::CompiledGraph& g = *p.graph;
  const compiler::CompileTimings& t = g.timings();
  nlohmann::json kernels = nlohmann::json::array();
  for (const compiler::FusedKernel& k : g.plan().kernels) {
    nlohmann::json ops = nlohmann::json::array();
    for (size_t n : k.nodes) ops.push_back(g.graph().nodes[n].op);
    nlohmann::json j = {{"name", k.name}, {"kind", compiler::kernel_kind_name(k.kind)}, {"ops", ops}};
    for (const compiler::KernelBuild& b : g.builds()) {
      if (b.name != k.name) continue;
      j["cache_hit"] = b.cache_hit;
      j["codegen_ns"] = b.codegen_ns;
      j["compile_ns"] = b.compile_ns;
      j["load_ns"] = b.load_ns;
      j["cache_key"] = b.key;
      j["library"] = b.library_path;
      j["gpu"] = nullptr;
      if (b.device) {
        const compiler::DeviceKernelInfo& d = *b.device;
        j["gpu"] = {{"path", d.path},           {"epilogue", d.epilogue},         {"epilogue_why", d.epilogue_why},
                    {"arch", d.arch},           {"ptx_loaded", d.ptx_loaded},     {"binary_version", d.binary_version},
                    {"ptx_version", d.ptx_version}, {"jit_log", d.jit_log},       {"nvrtc_ns", d.nvrtc_ns},
                    {"jit_ns", d.jit_ns},       {"ptx_cache_hit", d.ptx_cache_hit}, {"ptx_path", d.ptx_path},
                    {"ptx_refused", d.ptx_refused}};
      }
    }
    kernels.push_back(j);
  }
  nlohmann::json j = {{"graph", g.graph().str()},
                      {"plan", g.plan().str(g.graph())},
                      {"ops_called", g.graph().calls()},
                      {"kernels_run", g.plan().kernels.size()},
                      {"bytes_moved", g.bytes_moved()},
                      {"eager_bytes_moved", compiler::eager_bytes_moved(g.graph())},
                      {"kernels", kernels},
                      {"cold_ns",
                       {{"capture", t.capture_ns},
                        {"fusion", t.fusion_ns},
                        {"codegen", t.codegen_ns},
                        {"compile", t.compile_ns},
                        {"load", t.load_ns},
                        {"total", t.total_ns()}}},
                      {"cache",
                       {{"dir", t.cache_dir},
                        {"note", t.cache_note},
                        {"hits", t.cache_hits},
                        {"misses", t.cache_misses},
                        {"compiler", t.compiler}}}};
  if (emit) j["source"] = g.emit_cpp();
  if (p.ptx) j["ptx"] = ptx_json(*p.ptx);
  return j;
}

}  // namespace strata::app
