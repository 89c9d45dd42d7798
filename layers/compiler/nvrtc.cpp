// NVRTC: a generated CUDA kernel to PTX for one architecture, in process, without a GPU or a driver, and
// the on-disk PTX cache in front of it.
//
// Note [The PTX cache]
// ~~~~~~~~~~~~~~~~~~~~
// The CPU kernels' cache (Note [The kernel cache] in jit.cpp), for PTX: the same directory, the same
// helpers. A kernel's PTX is <cache>/<key>.ptx, key = FNV-1a (16 hex digits) of what determines NVRTC's
// output: a format version, the target architecture, NVRTC's version, its options, the entry's name and
// the CUDA source; the source is kept beside it as <key>.cu for reading. Both are written to a temporary
// in the cache directory and renamed onto their names, so concurrent compiles of one kernel each publish a
// complete file and a reader never sees half of one. A PTX file has no symbol to check at load as a shared
// object has, so it opens with a header line
//   // strata-ptx-cache v1 key=<key> log_bytes=<n> ptx_bytes=<m> fnv1a=<hash of the rest>
// followed by NVRTC's log and the PTX. A file whose header does not parse, names another key, or whose
// length or hash disagree (truncated, edited, half of a copy) is refused, said why, and compiled again
// over; only a file that checks out is a hit. A hit costs reading the file, the time the report shows
// in place of NVRTC's.
#include <nvrtc.h>
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <optional>
#include <string>

#include "layers/compiler/compiler_cuda.h"
#include "layers/compiler/internal.h"
#include "lib/host_clock.h"
#include "lib/zone.h"

namespace strata::compiler::cuda {
namespace {

constexpr const char* kCacheFormat = "strata-ptx-cache v1";

std::string nvrtc_log(nvrtcProgram prog) {
  size_t size = 0;
  if (nvrtcGetProgramLogSize(prog, &size) != NVRTC_SUCCESS || size <= 1) return "";
  std::string log(size, '\0');
  if (nvrtcGetProgramLog(prog, log.data()) != NVRTC_SUCCESS) return "";
  log.resize(size - 1);  // the terminating NUL
  return log;
}

void check(nvrtcResult r, const std::string& what, const std::string& source_name) {
  if (r != NVRTC_SUCCESS)
    throw Error("NVRTC: " + what + " for " + source_name + " failed: " + nvrtcGetErrorString(r));
}

// compute_XX, not sm_XX: a virtual architecture makes NVRTC stop at PTX (sm_XX would make a cubin, and
// PTX only beside it); ptxas then assembles that PTX for sm_XX (run_ptxas).
std::vector<std::string> nvrtc_options(const std::string& arch) {
  return {"--gpu-architecture=compute_" + arch.substr(3), "--std=c++17"};
}

std::string nvrtc_version() {
  int major = 0, minor = 0;
  if (nvrtcVersion(&major, &minor) != NVRTC_SUCCESS) return "unknown";
  return std::to_string(major) + "." + std::to_string(minor);
}

std::string cache_header(const std::string& key, const Ptx& ptx) {
  const std::string body = ptx.log + ptx.ptx;
  return "// " + std::string(kCacheFormat) + " key=" + key + " log_bytes=" + std::to_string(ptx.log.size()) +
         " ptx_bytes=" + std::to_string(ptx.ptx.size()) + " fnv1a=" + detail::hex16(detail::fnv1a(body)) + "\n";
}

// The log and PTX of a cached file, or "" in `why` with them filled in; else why the file is refused.
std::string parse_cached(const std::string& file, const std::string& key, Ptx& out) {
  const size_t eol = file.find('\n');
  if (eol == std::string::npos) return "it has no header line (empty or truncated)";
  char format[32] = {}, stored_key[32] = {}, hash[32] = {};
  size_t log_bytes = 0, ptx_bytes = 0;
  const std::string header = file.substr(0, eol);
  if (header.rfind("// " + std::string(kCacheFormat) + " ", 0) != 0 ||
      std::sscanf(header.c_str(), "// %31s v1 key=%31s log_bytes=%zu ptx_bytes=%zu fnv1a=%31s", format,
                  stored_key, &log_bytes, &ptx_bytes, hash) != 5) {
    return "its first line is not a " + std::string(kCacheFormat) + " header";
  }
  if (key != stored_key) return std::string("its header names key ") + stored_key;
  const size_t body = file.size() - eol - 1;
  if (body != log_bytes + ptx_bytes) {
    return "it holds " + std::to_string(body) + " bytes after its header, which says " +
           std::to_string(log_bytes + ptx_bytes) + " (truncated or appended to)";
  }
  const std::string rest = file.substr(eol + 1);
  if (detail::hex16(detail::fnv1a(rest)) != hash) return "its contents do not match the hash in its header";
  out.log = rest.substr(0, log_bytes);
  out.ptx = rest.substr(log_bytes);
  return "";
}

}  // namespace

Ptx compile_ptx(const CudaKernel& kernel, const std::string& arch) {
  check_arch(arch);
  const std::string source_name = kernel.name + ".cu";
  nvrtcProgram prog = nullptr;
  check(nvrtcCreateProgram(&prog, kernel.source.c_str(), source_name.c_str(), 0, nullptr, nullptr),
        "creating the program", source_name);
  std::unique_ptr<nvrtcProgram, void (*)(nvrtcProgram*)> owner(
      &prog, [](nvrtcProgram* p) { nvrtcDestroyProgram(p); });
  const std::vector<std::string> options = nvrtc_options(arch);
  std::vector<const char*> option_ptrs;
  for (const std::string& o : options) option_ptrs.push_back(o.c_str());
  const nvrtcResult compiled = nvrtcCompileProgram(prog, int(option_ptrs.size()), option_ptrs.data());
  Ptx out;
  out.arch = arch;
  out.log = nvrtc_log(prog);
  if (compiled != NVRTC_SUCCESS) {
    throw KernelCompileError("NVRTC could not compile " + source_name + " for " + arch + " (" +
                                 nvrtcGetErrorString(compiled) + "):\n" + out.log,
                             source_name);
  }
  size_t size = 0;
  check(nvrtcGetPTXSize(prog, &size), "getting the PTX size", source_name);
  out.ptx.assign(size, '\0');
  check(nvrtcGetPTX(prog, out.ptx.data()), "getting the PTX", source_name);
  if (!out.ptx.empty() && out.ptx.back() == '\0') out.ptx.pop_back();
  return out;
}

std::string ptx_cache_key(const CudaKernel& kernel, const std::string& arch) {
  check_arch(arch);
  std::string text = std::string(kCacheFormat) + "\narch=" + arch + "\nnvrtc=" + nvrtc_version() + "\noptions=";
  for (const std::string& o : nvrtc_options(arch)) text += o + " ";
  text += "\nentry=" + kernel.name + "\n" + kernel.source;
  return detail::hex16(detail::fnv1a(text));
}

Ptx cached_ptx(const CudaKernel& kernel, const std::string& arch, const std::string& cache_dir) {
  const std::string key = ptx_cache_key(kernel, arch);
  const detail::CacheDir cache = detail::resolve_cache_dir(cache_dir);
  const std::string path = cache.path + "/" + key + ".ptx";
  Ptx out;
  int64_t t0 = host_clock::now_ns();
  {
    STRATA_ZONE(zone, Layer::kFrontend, "read (PTX cache)");
    // A FIFO or a link to /dev/zero under the name is refused unread (Note [Reading a file strata did
    // not write] in lib/input_file.h), and compiled over as a damaged file is.
    if (const std::optional<std::string> bytes = detail::read_cache_entry(path, out.refused)) {
      out.refused = parse_cached(*bytes, key, out);
      out.cache_hit = out.refused.empty();
    }
  }
  out.read_ns = double(host_clock::now_ns() - t0);
  if (!out.cache_hit) {
    const std::string refused = out.refused;
    const double read_ns = out.read_ns;
    t0 = host_clock::now_ns();
    {
      STRATA_ZONE(zone, Layer::kFrontend, "compile (NVRTC, CUDA C -> PTX)");
      out = compile_ptx(kernel, arch);
    }
    out.compile_ns = double(host_clock::now_ns() - t0);
    out.refused = refused;
    out.read_ns = read_ns;
    detail::write_into_cache(cache.path, key, ".ptx", cache_header(key, out) + out.log + out.ptx);
    try {
      detail::write_into_cache(cache.path, key, ".cu", kernel.source);
    } catch (const Error&) {  // the source copy is for reading only; the PTX is in place
    }
  }
  out.arch = arch;
  out.key = key;
  out.path = path;
  out.cache_dir = cache.path;
  out.cache_note = cache.note;
  return out;
}

std::vector<PtxKernel> emit_ptx(const CompiledGraph& graph, const std::string& arch, bool keep_cubin) {
  check_arch(arch);
  std::vector<PtxKernel> out;
  for (CudaKernel& k : generate_cuda(graph)) {
    Ptx ptx = cached_ptx(k, arch);
    PtxasReport report = run_ptxas(ptx.ptx, arch, keep_cubin);
    out.push_back({std::move(k), std::move(ptx), std::move(report)});
  }
  return out;
}

}  // namespace strata::compiler::cuda
