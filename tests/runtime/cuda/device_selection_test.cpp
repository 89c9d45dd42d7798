// Device selection in a CUDA build (apps/cuda_module/device_choice_cuda.cpp over layers/runtime/cuda), on
// whatever machine runs the tests. Without a usable GPU: --device auto picks the CPU and says why in one
// line, an explicit --device cuda exits 4 with the reason, `strata devices` says why there is none and
// exits 0. With one: an index past the last device is refused with the count.
#include <doctest/doctest.h>

#include <dlfcn.h>

#include <string>

#include "layers/device/cupti/cupti_trace.h"
#include "layers/runtime/cuda/cuda_runtime_layer.h"
#include "lib/error.h"
#include "measure/device_session.h"
#include "tests/support/subprocess.h"

using namespace strata;
namespace rt = strata::runtime::cuda;

namespace {

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

frontend::DeviceRequest request(const char* text) { return frontend::parse_device(text); }

// Why `--device auto` chose the CPU: without the driver's libcuda.so.1 it does not load the CUDA module
// (Note [No driver, no module] in measure/devices/cuda_module.cpp), otherwise the runtime's probe says why.
std::string auto_cpu_reason(const rt::Probe& p) {
  void* driver = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
  if (driver == nullptr) return "no CUDA driver (libcuda.so.1, which the NVIDIA driver installs, is not on the loader's path";
  dlclose(driver);
  return p.reason;
}

}  // namespace

TEST_CASE("--device auto: cuda:0 when the runtime finds a usable GPU, else the CPU with the reason") {
  const rt::Probe p = rt::probe();
  const measure::DeviceChoice choice = measure::choose_device(request("auto"));
  if (p.usable && rt::unsupported_reason(0).empty()) {
    CHECK(choice.device == Device{DeviceType::kCUDA, 0});
    CHECK(contains(choice.reason, "auto chose cuda:0"));
  } else {
    CHECK(choice.device == kCPU);
    CHECK(choice.reason.rfind("auto chose the CPU: ", 0) == 0);
    if (!p.usable) CHECK(contains(choice.reason, auto_cpu_reason(p)));
    CHECK(choice.reason.find('\n') == std::string::npos);
  }
}

TEST_CASE("--device cpu is always the CPU, with no reason needed") {
  const measure::DeviceChoice choice = measure::choose_device(request("cpu"));
  CHECK(choice.device == kCPU);
  CHECK(choice.reason.empty());
}

TEST_CASE("an explicit CUDA device that cannot be served is UnavailableError, with the reason") {
  const rt::Probe p = rt::probe();
  for (const char* text : {"cuda", "cuda:0", "cuda:5"}) {
    CAPTURE(std::string(text));
    const bool servable = p.usable && request(text).device.index < p.device_count;
    if (servable) continue;
    try {
      measure::choose_device(request(text));
      FAIL("no throw");
    } catch (const UnavailableError& e) {
      CHECK(e.code() == ExitCode::kUnavailable);
      CHECK(contains(e.what(), std::string("--device ") + text));
      if (!p.usable) CHECK(contains(e.what(), p.reason));
      if (p.usable) CHECK(contains(e.what(), "this machine has " + std::to_string(p.device_count) + " CUDA device"));
    }
  }
}

TEST_CASE("strata trace --device cuda exits 4 and says why when there is no usable GPU") {
  const rt::Probe p = rt::probe();
  if (p.usable) {
    const test::RunResult r = test::run_strata({"trace", "relu", "1024", "--device", "cuda:" + std::to_string(p.device_count)});
    CHECK(r.exit_code == 4);
    CHECK(contains(r.err, "this machine has " + std::to_string(p.device_count)));
    return;
  }
  const test::RunResult r = test::run_strata({"trace", "matmul", "64", "--device", "cuda"});
  CHECK(r.exit_code == 4);
  CHECK(contains(r.err, "--device cuda: " + p.reason));
  CHECK(r.out.empty());
}

TEST_CASE("strata trace with --device auto runs on the CPU and prints the reason line") {
  const rt::Probe p = rt::probe();
  if (p.usable) return;  // covered by the gpu-labelled tests
  const test::RunResult r = test::run_strata({"trace", "relu", "4096", "--repeat", "3", "--warmup", "1"});
  CHECK(r.exit_code == 0);
  CHECK(contains(r.out, "device: auto chose the CPU: " + auto_cpu_reason(p)));
}

TEST_CASE("strata devices: the GPUs, or exactly why there is none, exit 0") {
  const rt::Probe p = rt::probe();
  const test::RunResult r = test::run_strata({"devices"});
  CHECK(r.exit_code == 0);
  CHECK(contains(r.out, "cpu: "));
  if (p.usable) {
    CHECK(contains(r.out, "cuda:0: "));
    CHECK(contains(r.out, "cuDNN"));
  } else {
    CHECK(contains(r.out, "cuda: none: " + p.reason));
  }
}

TEST_CASE("CUPTI without a driver: start_session says why in one line and nothing crashes") {
  if (rt::probe().usable) return;  // the gpu-labelled tests start a real session
  const std::string reason = cupti::start_session();
  CHECK_FALSE(reason.empty());
  CHECK(reason.find('\n') == std::string::npos);
  CHECK_FALSE(cupti::session_active());
  cupti::push_op(1);  // no session: these are no-ops
  cupti::pop_op();
  DeviceTrace trace;
  cupti::finish_session(trace);
  CHECK_FALSE(trace.enabled);
  CHECK_FALSE(trace.unavailable_reason.empty());
  // One session per process, even a failed one: see Note [One CUPTI session].
  CHECK(contains(cupti::start_session(), "one session per process"));
}
