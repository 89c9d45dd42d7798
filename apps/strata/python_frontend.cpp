#include "apps/strata/python_frontend.h"

#include <algorithm>
#include <cstdio>
#include <string>

#include "layers/kernels/reference/reference.h"
#include "lib/error.h"
#include "lib/host_clock.h"
#include "lib/timeline.h"
#include "measure/harness.h"
#include "reports/formats/table.h"

namespace strata::app {
namespace {

#if !STRATA_WITH_PYTHON
constexpr const char* kNoPythonModule =
    "this strata was built without its Python module (libstrata_python.so needs pybind11-dev and python3-dev's "
    "libpython at configure time, and is left out of sanitizer and fuzz builds; scripts/install-deps installs them)";
#endif

// Host ns of the one-time Python setup: starting the interpreter and importing strata (with the first
// bind), and importing torch and making its inputs (the peer's bind). Setup, never part of a call.
double g_strata_setup_ns = 0;
double g_torch_setup_ns = 0;

}  // namespace

void check_frontend_options(const TraceOptions& o) {
  if (o.frontend != "cli" && o.frontend != "python") {
    throw UsageError("--frontend " + quote_typed(o.frontend) +
                     " is not a frontend; allowed: cli (the op called from C++), python (through `import strata` in "
                     "the embedded interpreter)");
  }
  if (!o.peer.empty() && o.peer != "torch") {
    throw UsageError("--peer " + quote_typed(o.peer) + " is not a peer; allowed: torch (PyTorch, from the embedded "
                     "interpreter)");
  }
}

#if STRATA_WITH_PYTHON
namespace {

std::string torch_dtype_name(DType d) {
  switch (d) {
    case DType::kF32: return "float32";
    case DType::kF64: return "float64";
    case DType::kF16: return "float16";
    case DType::kBF16: return "bfloat16";
  }
  return "";
}

// The same work on torch's side as on strata's: --backward and --autocast have torch counterparts.
python_module::PeerOptions peer_options(const Prepared& p, const TraceOptions& o) {
  python_module::PeerOptions options;
  options.backward = o.backward;
  if (p.autocast) options.autocast = torch_dtype_name(*p.autocast);
  options.result_dtype = torch_dtype_name(p.compute_dtype());
  return options;
}

}  // namespace
#endif

void prepare_python(Prepared& p, const TraceOptions& o) {
  p.frontend = o.frontend;
  if (o.frontend == "cli" && o.peer.empty()) return;
#if STRATA_WITH_PYTHON
  const StrataPythonModule& module = require_python_module();
  const std::string package = python_package_dir();
  if (o.frontend == "python") {
    const uint64_t t0 = host_clock::ticks();
    p.python_call = module.bind_strata(p.call, package);
    g_strata_setup_ns = host_clock::elapsed_ns(t0);
    python_module::PythonCall* call = p.python_call.get();
    p.invoke = [call] { return call->call(); };
  }
  if (o.peer == "torch") {
    const uint64_t t0 = host_clock::ticks();
    p.peer_call = module.bind_torch(p.call, package, peer_options(p, o));
    g_torch_setup_ns = host_clock::elapsed_ns(t0);
  }
#else
  throw UnavailableError(std::string(o.frontend == "python" ? "--frontend python" : "--peer " + o.peer) + ": " +
                         kNoPythonModule);
#endif
}

std::string frontend_description(const Prepared& p) {
  if (!p.python_call) return "";
#if STRATA_WITH_PYTHON
  char setup[160];
  std::snprintf(setup, sizeof setup,
                " (setup, not in the cold call: libstrata_python.so loaded in %.1f ms, interpreter + import strata %.1f ms)",
                python_load_ns() / 1e6, g_strata_setup_ns / 1e6);
  return p.python_call->expression() + " in the embedded " + STRATA_PYTHON_EXECUTABLE + " with environment " +
         p.python_call->environment() + setup;
#else
  return "";
#endif
}

reports::PeerReport run_peer(Prepared& p, const TraceOptions& options, int64_t warmup, int64_t repeat, const binding::IValue& strata_result,
                             const std::vector<double>& strata_untraced_ns, Timeline& timeline) {
  python_module::PeerCall& peer = *p.peer_call;
  reports::PeerReport rep;
  rep.name = "torch";
  rep.version = peer.version();
  rep.expression = peer.expression();
  rep.work = peer.work();
  rep.setup_ns = g_torch_setup_ns;
  // Timed as the harness times strata: host clock around the call, which synchronises on a GPU.
  const uint64_t c0 = host_clock::ticks();
  peer.call();
  rep.cold_ns = host_clock::elapsed_ns(c0);
  for (int64_t i = 0; i < warmup; ++i) {
    measure::stop_if_interrupted();
    peer.call();
  }
  std::vector<double> wall;
  wall.reserve(static_cast<size_t>(repeat));
  timeline.reserve_more(static_cast<size_t>(repeat) + 8);
  static const std::string kSpanName = "torch peer call";  // spans keep a pointer to their name
  for (int64_t i = 0; i < repeat; ++i) {
    measure::stop_if_interrupted();
    const uint64_t t0 = host_clock::ticks();
    peer.call();
    const uint64_t t1 = host_clock::ticks();
    wall.push_back(double(host_clock::ticks_to_ns(t1) - host_clock::ticks_to_ns(t0)));
    timeline.add_span(Layer::kHarness, kSpanName.c_str(), t0, t1, -1, 0, ZoneKind::kPlain);
  }
  rep.wall = reports::Distribution::of(wall);
  rep.strata_wall = reports::Distribution::of(strata_untraced_ns);
  if (writes_in_place(p.call)) {
    // An in-place op (Note [In-place operators]) has written each side's input once per call, and the
    // sides made different numbers of calls (strata's traced ones too), so their last results are not
    // comparable: each side makes one call on fresh copies of the same inputs instead, torch's first (its
    // copies are converted before strata's call writes them), strata's untraced.
    frontend::PreparedCall fresh = fresh_inputs(p, options);
    const std::vector<double> torch_values = peer.result_on(fresh);
    const tracing::ActiveScope untraced(nullptr);
    rep.relative_difference = reference::relative_error(fresh.op->call(fresh.args).tensor(), torch_values);
    rep.difference_of = "one call each on fresh copies of the inputs: an in-place op's timed calls wrote them";
  } else if (strata_result.is_tensor()) {
    rep.relative_difference = peer.relative_difference(strata_result.tensor());
  }
  // The profiler's own overhead changes what it measures; it runs after the timed calls, on its own.
  rep.profiled_calls = static_cast<int>(std::min<int64_t>(std::max<int64_t>(repeat, 1), 100));
  rep.profile = peer.profile(rep.profiled_calls, rep.profile_resolution_ns, rep.profile_note);
  // torch's rows: their own calls with the probes in, after every untraced one (Note [torch's rows]).
  peer.layers(static_cast<int>(std::min<int64_t>(std::max<int64_t>(repeat, 1), 200)), rep, timeline);
  return rep;
}

void print_python_info(std::ostream& out) {
#if STRATA_WITH_PYTHON
  std::string why;
  const StrataPythonModule* module = python_module(why);
  if (module == nullptr) {
    out << "python: none: " << why << "\n";
    return;
  }
  std::string package;
  try {
    package = python_package_dir();
  } catch (const Error& e) {
    out << "python: " << STRATA_PYTHON_EXECUTABLE << " (embedded); strata package: " << e.what() << "\n";
    return;
  }
  const python_module::PythonInfo info = module->describe(package);
  out << "python: " << info.executable << " " << info.version << " (embedded: " << info.library << ")\n";
  out << "  environment: " << info.environment << "\n";
  out << "  strata package: " << (info.package_error.empty() ? info.package_dir : info.package_error) << "\n";
  if (!info.torch_version.empty()) {
    out << "  torch: " << info.torch_version << " (" << info.torch_cuda << "): --peer torch works\n";
  } else {
    out << "  torch: not importable (" << info.torch_error << "): --peer torch exits 4\n";
  }
#else
  out << "python: none: " << kNoPythonModule << "\n";
#endif
}

}  // namespace strata::app
