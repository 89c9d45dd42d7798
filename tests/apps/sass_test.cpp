// `strata sass` end to end: the real binary with a stand-in cuobjdump (a script, written here, that prints
// the committed real listings of tests/compiler/data/sass), and the refusal when there is no cuobjdump.
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <string>
#include <utility>

#include "layers/compiler/sass.h"
#include "tests/apps/e2e.h"

namespace strata::test {
namespace {

const std::string kData = std::string(STRATA_SOURCE_DIR) + "/tests/compiler/data/sass/";

// A cuobjdump that answers --list-elf with list.txt and -sass with the trimmed listing, whatever the module.
std::string fake_cuobjdump(const TempDir& dir) {
  const std::string path = dir.file("cuobjdump");
  std::ofstream(path) << "#!/bin/sh\ncase \"$1\" in\n  --list-elf) cat '" << kData
                      << "list.txt' ;;\n  -sass) cat '" << kData
                      << "sass_trimmed.txt' ;;\n  *) exit 1 ;;\nesac\n";
  REQUIRE(::chmod(path.c_str(), 0755) == 0);
  return path;
}

}  // namespace

TEST_CASE("strata sass with a stand-in cuobjdump: architectures, no PTX, each kernel's mix") {
  TempDir dir;
  const std::string cuobjdump = fake_cuobjdump(dir);
  const std::string module = kData + "list.txt";  // any readable file: the stand-in does not read it
  const RunResult r = run_strata({"sass", "--module", module}, {.env = {"CUOBJDUMP=" + cuobjdump}});
  check_no_crash(r);
  INFO("stdout:\n" << r.out << "\nstderr:\n" << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(contains(r.out, "module: " + module + "\n"));
  CHECK(contains(r.out, "cuobjdump: " + cuobjdump + "\n"));
  CHECK(contains(r.out, "embedded SASS: sm_90\n"));
  CHECK(contains(r.out, "embedded PTX: none\n"));
  CHECK(contains(r.out, "kernels: 3\n"));
  // add_kernel<__half>'s row: 56 instructions, then fp32 1, fp64 0, half 2, tensor 0, ld.global 2,
  // st.global 1, shared 0, const 9, branch 4, convert 1, mufu 0, int 20, nop 13, other 3 (sass_test.cpp
  // counts the same figures from the listing).
  std::string row;
  for (const int n : {56, 1, 0, 2, 0, 2, 1, 0, 9, 4, 1, 0, 20, 13, 3}) row += " " + std::to_string(n);
  std::string squeezed;  // the row with its padding collapsed to single spaces
  for (const char ch : r.out) {
    if (ch != ' ' || squeezed.empty() || squeezed.back() != ' ') squeezed += ch;
  }
  CHECK(contains(squeezed, "sm_90" + row + " add_kernel<__half>\n"));
  CHECK(contains(squeezed, " channel_partials_kernel<float>\n"));
  CHECK(contains(squeezed, " tanh_kernel<__nv_bfloat16>\n"));
  CHECK(r.err.empty());
}

TEST_CASE("strata sass without cuobjdump: exit 4, naming what is missing and where to get it") {
  const RunResult r = run_strata({"sass"}, {.env = {"CUOBJDUMP=/nonexistent"}});
  check_refused(r, 4, "CUOBJDUMP is /nonexistent");
  CHECK(contains(r.err, "pip install nvidia-cuda-cuobjdump"));
  CHECK(contains(r.err, "CUDA toolkit"));
}

TEST_CASE("strata sass --module that does not exist: exit 2") {
  TempDir dir;
  const RunResult r =
      run_strata({"sass", "--module", dir.file("absent.so")}, {.env = {"CUOBJDUMP=" + fake_cuobjdump(dir)}});
  check_refused(r, 2, "--module");
}

TEST_CASE("strata sass --module that is no regular file: exit 2 at once, naming what it is (no hang)") {
  TempDir dir;
  REQUIRE(::mkfifo(dir.file("fifo").c_str(), 0600) == 0);
  REQUIRE(::symlink("/dev/zero", dir.file("zero.so").c_str()) == 0);
  REQUIRE(::symlink(dir.file("fifo").c_str(), dir.file("fifo.so").c_str()) == 0);
  REQUIRE(::mkdir(dir.file("dir.so").c_str(), 0700) == 0);
  const std::pair<std::string, std::string> modules[] = {
      {dir.file("fifo"), "is a named pipe (FIFO)"},
      {dir.file("fifo.so"), "is a named pipe (FIFO)"},
      {dir.file("zero.so"), "is a character device"},
      {"/dev/zero", "is a character device"},
      {dir.file("dir.so"), "is a directory"}};
  for (const auto& m : modules) {
    INFO(m.first);
    // Subprocess::wait's timeout would kill a hung run: its SIGKILL fails check_refused's exit code.
    Subprocess p({"sass", "--module", m.first}, {.env = {"CUOBJDUMP=" + fake_cuobjdump(dir)}});
    const RunResult r = p.wait(20);
    check_refused(r, 2, "--module '" + m.first + "': it " + m.second);
  }
}

// The real thing: this build's libstrata_cuda.so through the cuobjdump compiler::find_cuda_tool finds (the
// toolkit's, or the venv's from scripts/install-python-deps: ctest's VIRTUAL_ENV is the project's venv).
TEST_CASE("strata sass on this build's libstrata_cuda.so with a real cuobjdump") {
  if (!STRATA_TEST_CUDA_BUILD) return;  // no libstrata_cuda.so to read
  std::string why;
  const std::string cuobjdump = compiler::find_cuda_tool("cuobjdump", why);
  if (cuobjdump.empty()) {
    MESSAGE("skipped: no cuobjdump (scripts/install-python-deps installs it): " << why);
    return;
  }
  const RunResult r = run_strata({"sass"});
  check_no_crash(r);
  INFO("stdout:\n" << r.out << "\nstderr:\n" << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(contains(r.out, "cuobjdump: " + cuobjdump + "\n"));
  CHECK(contains(r.out, "libstrata_cuda.so\n"));
  CHECK(contains(r.out, "embedded SASS: sm_"));
  CHECK(!contains(r.out, "\nkernels: 0\n"));
  CHECK(contains(r.out, " add_kernel<float>\n"));
}

}  // namespace strata::test

