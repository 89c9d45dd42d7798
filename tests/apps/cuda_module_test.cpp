// The CUDA libraries are loaded on the first CUDA use, not at start-up (Note [The CUDA module] in
// apps/strata/cuda_module.h; docs/errors.md): end to end against the real binary of a build with the CUDA
// layers. A CPU run must work under an address-space limit the CUDA libraries alone exceed, and a module
// that cannot be loaded is one line with dlopen's reason, never a loader error before main.
#include <cstdio>
#include <string>

#include "tests/apps/e2e.h"

using namespace strata::test;

namespace {

// `ulimit -v 300000`: about 293 MiB of address space. strata with the CUDA libraries mapped at start-up
// needed more than that before main ran (libcublasLt.so.13: failed to map segment).
RunOptions small_address_space() {
  RunOptions o;
  o.address_space_limit = int64_t(300000) * 1024;
  return o;
}

RunOptions missing_module() {
  RunOptions o;
  o.env = {"STRATA_CUDA_MODULE=/nonexistent/libstrata_cuda.so"};
  return o;
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
  for (const char* lib : {"libcudart", "libcublas", "libcublasLt", "libcudnn", "libcupti", "libcuda.", "libstrata_cuda"}) {
    CHECK_MESSAGE(!contains(d, std::string("[") + lib), lib);
  }
}

TEST_CASE("a CPU run works in an address space too small for the CUDA libraries") {
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"ops"}, cpu({"trace", "relu", "16"}), cpu({"compare", "relu", "16"})}) {
    CAPTURE(args[0]);
    const RunResult r = run_strata(args, small_address_space());
    check_no_crash(r);
    CHECK_MESSAGE(r.exit_code == 0, r.err);
  }
  // `strata ops` lists the CUDA kernels from their declarations without loading them.
  const RunResult r = run_strata({"ops"}, small_address_space());
  CHECK(count_of(r.out, "[in libstrata_cuda.so, registered on the first CUDA use]") == 7);
  CHECK(count_of(r.out, "  CUDA      layers/kernels/cuda/") == 7);
}

TEST_CASE("a module that cannot be mapped: devices says why, auto runs on the CPU, cuda exits 4") {
  RunResult r = run_strata({"devices"}, small_address_space());
  check_no_crash(r);
  CHECK(r.exit_code == 0);
  CHECK(contains(r.out, "cuda: none: the CUDA module could not be loaded: "));
  r = run_strata(fast({"trace", "relu", "16"}), small_address_space());
  check_no_crash(r);
  CHECK_MESSAGE(r.exit_code == 0, r.err);
  CHECK(contains(r.out, "auto chose the CPU: the CUDA module could not be loaded: "));
  r = run_strata(fast({"trace", "relu", "16", "--device", "cuda"}), small_address_space());
  check_no_crash(r);
  CHECK(r.exit_code == 4);
  CHECK(contains(r.err, "strata: error: --device cuda: the CUDA module could not be loaded: "));
  CHECK(r.out.empty());
}

TEST_CASE("STRATA_CUDA_MODULE naming no file: exit 4 for --device cuda, the CPU for auto, both with dlopen's reason") {
  const std::string reason =
      "the CUDA module could not be loaded: /nonexistent/libstrata_cuda.so: cannot open shared object file";
  RunResult r = run_strata(fast({"trace", "matmul", "16", "--device", "cuda:0"}), missing_module());
  check_no_crash(r);
  CHECK(r.exit_code == 4);
  CHECK(contains(r.err, "--device cuda:0: " + reason));
  CHECK(r.out.empty());
  r = run_strata(fast({"trace", "matmul", "16", "--device", "auto"}), missing_module());
  check_no_crash(r);
  CHECK(r.exit_code == 0);
  CHECK(contains(r.out, "auto chose the CPU: " + reason));
  r = run_strata({"devices"}, missing_module());
  CHECK(r.exit_code == 0);
  CHECK(contains(r.out, "cuda: none: " + reason));
}

TEST_CASE("the module this build wrote loads: every symbol it takes from the executable is there") {
  // RTLD_NOW: a strata symbol the executable does not export would fail the load here, with its name.
  const RunResult r = run_strata({"devices"});
  check_no_crash(r);
  CHECK(r.exit_code == 0);
  CHECK_MESSAGE(!contains(r.out, "could not be loaded"), r.out);
  CHECK(contains(r.out, "cuda"));
}
