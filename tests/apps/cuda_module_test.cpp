// The CUDA libraries are loaded on the first CUDA use, not at start-up (Note [The CUDA module] in
// measure/devices/cuda_module.h; docs/errors.md): end to end against the real binary of a build with the
// CUDA layers. A CPU run must work under an address-space limit the CUDA libraries alone exceed, and a module
// that cannot be loaded is one line with dlopen's reason, never a loader error before main.
#include <dlfcn.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "layers/ops/operators.h"
#include "tests/apps/e2e.h"

using namespace strata::test;

namespace {

// `ulimit -v 300000`: about 293 MiB of address space. strata with the CUDA libraries mapped at start-up
// needed more than that before main ran (libcublasLt.so.13: failed to map segment).
// `--device auto` loads the module only where the loader finds the driver's libcuda.so.1 (Note [No
// driver, no module]). On a machine without a driver the auto cases below put the toolkit's stub on the
// loader's path under that name, so that auto goes on to load the module, as it does where a driver is.
class StubDriver {
 public:
  StubDriver() {
#ifdef STRATA_CUDA_STUB_DRIVER
    REQUIRE(symlink(STRATA_CUDA_STUB_DRIVER, dir_.file("libcuda.so.1").c_str()) == 0);
#endif
  }
  std::string loader_path() const { return "LD_LIBRARY_PATH=" + dir_.path(); }

 private:
  TempDir dir_;
};

RunOptions small_address_space(const StubDriver& driver) {
  RunOptions o;
  o.address_space_limit = int64_t(300000) * 1024;
  // One OpenBLAS thread: on a machine with many cores its thread stacks alone would not fit (16 threads
  // failed pthread_create on the 16-core GPU machine), and the test is about the CUDA libraries.
  o.env = {driver.loader_path(), "OPENBLAS_NUM_THREADS=1"};
  return o;
}

RunOptions missing_module(const StubDriver& driver) {
  RunOptions o;
  o.env = {"STRATA_CUDA_MODULE=/nonexistent/libstrata_cuda.so", driver.loader_path()};
  return o;
}

bool driver_loadable() {
  void* handle = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
  if (handle != nullptr) dlclose(handle);
  return handle != nullptr;
}

std::string dynamic_section(const std::string& file) {
  std::string out;
  FILE* p = popen(("readelf -d '" + file + "' 2>&1").c_str(), "r");
  REQUIRE(p != nullptr);
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  pclose(p);
  return out;
}

}  // namespace

TEST_CASE("the strata executable links none of the CUDA libraries") {
  const std::string d = dynamic_section(STRATA_BIN);
  REQUIRE_MESSAGE(contains(d, "(NEEDED)"), d);  // readelf ran and read the file
  // NVRTC neither (Note [The PTX module]): only --emit ptx loads it, through libstrata_ptx.so.
  for (const char* lib : {"libcudart", "libcublas", "libcublasLt", "libcudnn", "libcupti", "libcuda.", "libstrata_cuda",
                          "libnvrtc", "libstrata_ptx"}) {
    CHECK_MESSAGE(!contains(d, std::string("[") + lib), std::string(lib));
  }
}

TEST_CASE("a CPU run works in an address space too small for the CUDA libraries") {
  const StubDriver driver;
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"ops"}, cpu({"trace", "relu", "16"}), cpu({"compare", "relu", "16"})}) {
    CAPTURE(args[0]);
    const RunResult r = run_strata(args, small_address_space(driver));
    check_no_crash(r);
    CHECK_MESSAGE(r.exit_code == 0, r.err);
  }
  // `strata ops` lists the CUDA kernels from their declarations without loading them.
  const RunResult r = run_strata({"ops"}, small_address_space(driver));
  // Every operator has a CUDA kernel, the gradient ops (docs/autograd.md), the in-place ops and the
  // reductions over dims included, but the two gradient ops of the views, slice_backward and sum_to, and
  // CopySlices' as_strided_scatter (CPU only so far, docs/views.md, docs/autograd.md). The views' kernels
  // are lib/views.cpp's (reshape's is in layers/ops), the same functions as on the CPU.
  constexpr int kCpuOnly = 3;
  CHECK(count_of(r.out, "[in libstrata_cuda.so, registered on the first CUDA use]") ==
        int(strata::ops::AllOps::kSize) - kCpuOnly);
  CHECK(count_of(r.out, "  CUDA      layers/kernels/cuda/") == int(strata::ops::AllOps::kSize) - kCpuOnly - 11);
  CHECK(count_of(r.out, "  CUDA      lib/views.cpp (view:") == 10);
  // ... and so the key summary does not call CUDA empty.
  CHECK_FALSE(contains(r.out, "CUDA: no operator has a kernel"));
}

TEST_CASE("a module that cannot be mapped: devices says why, auto runs on the CPU, cuda exits 4") {
  const StubDriver driver;
  RunResult r = run_strata({"devices"}, small_address_space(driver));
  check_no_crash(r);
  CHECK(r.exit_code == 0);
  CHECK(contains(r.out, "cuda: none: the CUDA module could not be loaded: "));
  r = run_strata(fast({"trace", "relu", "16"}), small_address_space(driver));
  check_no_crash(r);
  CHECK_MESSAGE(r.exit_code == 0, r.err);
  CHECK(contains(r.out, "auto chose the CPU: the CUDA module could not be loaded: "));
  r = run_strata(fast({"trace", "relu", "16", "--device", "cuda"}), small_address_space(driver));
  check_no_crash(r);
  CHECK(r.exit_code == 4);
  CHECK(contains(r.err, "strata: error: --device cuda: the CUDA module could not be loaded: "));
  CHECK(r.out.empty());
}

TEST_CASE("STRATA_CUDA_MODULE naming no file: exit 4 for --device cuda, the CPU for auto, both with dlopen's reason") {
  const std::string reason =
      "the CUDA module could not be loaded: /nonexistent/libstrata_cuda.so: cannot open shared object file";
  const StubDriver driver;
  RunResult r = run_strata(fast({"trace", "matmul", "16", "--device", "cuda:0"}), missing_module(driver));
  check_no_crash(r);
  CHECK(r.exit_code == 4);
  CHECK(contains(r.err, "--device cuda:0: " + reason));
  CHECK(r.out.empty());
  r = run_strata(fast({"trace", "matmul", "16", "--device", "auto"}), missing_module(driver));
  check_no_crash(r);
  CHECK(r.exit_code == 0);
  CHECK(contains(r.out, "auto chose the CPU: " + reason));
  r = run_strata({"devices"}, missing_module(driver));
  CHECK(r.exit_code == 0);
  CHECK(contains(r.out, "cuda: none: " + reason));
}

TEST_CASE("without a driver, auto chooses the CPU without loading the module") {
  if (driver_loadable()) {
    MESSAGE("skipped: this machine's loader finds libcuda.so.1 (a driver is installed)");
    return;
  }
  // A module that cannot even be found is never looked for: auto stops at the missing driver.
  RunOptions o;
  o.env = {"STRATA_CUDA_MODULE=/nonexistent/libstrata_cuda.so"};
  o.address_space_limit = int64_t(300000) * 1024;
  const RunResult r = run_strata(fast({"trace", "relu", "16"}), o);
  check_no_crash(r);
  CHECK_MESSAGE(r.exit_code == 0, r.err);
  CHECK(contains(r.out, "auto chose the CPU: no CUDA driver (libcuda.so.1, which the NVIDIA driver installs, is not on "
                        "the loader's path; the CUDA module was not loaded)"));
  CHECK(!contains(r.out, "could not be loaded"));
}

TEST_CASE("the module this build wrote loads: every symbol it takes from the executable is there") {
  // RTLD_NOW: a strata symbol the executable does not export would fail the load here, with its name.
  const RunResult r = run_strata({"devices"});
  check_no_crash(r);
  CHECK(r.exit_code == 0);
  CHECK_MESSAGE(!contains(r.out, "could not be loaded"), r.out);
  CHECK(contains(r.out, "cuda"));
}
