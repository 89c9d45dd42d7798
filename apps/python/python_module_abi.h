// Note [The Python module]
// ~~~~~~~~~~~~~~~~~~~~~~~~
// `--frontend python` runs the op through `import strata` (layer 0) from inside the strata program, and
// `--peer torch` runs the same op through PyTorch beside it. Both need an interpreter in the process.
//
//  - Embedded, not a child process: the Python call must be timed by the harness like any other call
//    (cold call, warm-ups, traced and untraced calls interleaved) and its C++ part must write spans into
//    the harness's timeline, which only works in one process on one host clock.
//  - A module loaded on demand, like the CUDA module (Note [The CUDA module]): libstrata_python.so links
//    libpython3.11 (pybind11::embed) and is dlopened only for --frontend python, --peer torch and
//    `strata devices`. A plain `strata trace` maps no libpython (some 20 MB with its dependencies,
//    measurable start-up), and a machine without the Python packages still runs every other command.
//    It is opened RTLD_GLOBAL because the extension modules the interpreter imports (numpy, torch._C)
//    expect libpython's symbols in the global scope, as they are in /usr/bin/python3.
//  - One copy of strata: the extension that `import strata` normally loads (build/python/strata/_strata.so)
//    statically contains the whole C++ stack. Loaded into the program it would bring a second dispatcher
//    and a second active-timeline variable, and its spans would never reach the harness. So the module is
//    built from the same source (apps/python/module.cpp, with STRATA_PYTHON_EMBEDDED) but without the
//    stack: its strata symbols resolve against the executable, which exports them (as for the CUDA
//    module), and it is registered as `strata._strata` in sys.modules before the package's own .py files
//    are imported. The Python code that runs is the package's, from the package directory below; the
//    pybind11 crossing is the extension's code, compiled once more.
//  - Which Python: the one libpython the module was linked with (Debian's /usr/bin/python3, 3.11; the
//    same the extension is built for). Its site-packages are on sys.path as for /usr/bin/python3, so
//    numpy and python3-torch import as they do there.
//  - Where the package is: $STRATA_PYTHONPATH if set (a directory holding strata/, taken as given), else
//    ../../python from the executable (build/apps/strata/strata -> build/python), else where this build
//    wrote it. The module itself: $STRATA_PYTHON_MODULE, else next to the executable, else where this
//    build wrote it. Anything missing is one line saying what and where, exit 4 (UnavailableError).
//  - The interpreter starts once, without Python's signal handlers (strata's SIGINT handling stays), and
//    is never finalised: torch does not support it, and the process is about to exit anyway.
//  - The GIL is held by the main thread from start to exit; nothing else runs Python.
//  - One contract, the table below (StrataPythonModule): declared here, beside its implementation
//    (python_embed.cpp), and included by the program's loader (apps/strata/python_module.cpp), as the
//    CUDA module's table is declared in measure/devices/cuda_module.h. The module's code is in namespace
//    strata::python_module, not the program's: the module is compiled from apps/python's sources only.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "layers/binding/binding.h"
#include "layers/frontend/frontend.h"
#include "lib/timeline.h"
#include "reports/model/report.h"

inline constexpr int kStrataPythonModuleVersion = 5;

namespace strata::python_module {

// What `strata devices` prints about Python, each field measured in the embedded interpreter.
struct PythonInfo {
  std::string executable;     // the python whose library is embedded ("/usr/bin/python3")
  std::string version;        // sys.version, first line
  std::string library;        // path of the libpython the module mapped
  std::string environment;    // the virtual environment it uses, or "none (why)" (Note [The embedded Python's environment])
  std::string package_dir;    // where `strata` was imported from
  std::string package_error;  // why `import strata` failed ("" when it worked)
  std::string torch_version;  // "" when torch is not importable
  std::string torch_error;    // why not
  std::string torch_cuda;     // "CUDA 12.1, 1 device" / "built without CUDA"
};

// One call of the op through `strata.<op>(...)` from the embedded interpreter.
class PythonCall {
 public:
  virtual ~PythonCall() = default;
  virtual binding::IValue call() = 0;        // throws strata::Error with the Python exception's text
  virtual std::string expression() const = 0;  // "strata.matmul(a, b)"
  virtual std::string environment() const = 0;  // as PythonInfo::environment
};

// What the peer does around the op so that both sides time the same work: strata's --backward and
// --autocast have torch counterparts (y.sum().backward(), torch.autocast), and a run with either on is
// compared only with torch doing the same.
struct PeerOptions {
  bool backward = false;      // y.sum().backward() after each call, as strata's --backward does
  std::string autocast;       // "" or torch's dtype name ("bfloat16", "float16"): torch.autocast around the op
  std::string result_dtype;   // the dtype of strata's result, in torch's spelling; torch's must be the same
};

// compare --peer torch: torch's rounds of K calls, eager and through its own replay (python_embed.cpp).
struct PeerRounds {
  std::string replay_kind;  // "torch.compile (inductor)", "CUDA Graph (torch.cuda.CUDAGraph)"; "" when none
  std::string why_no_replay;
  double setup_ns = 0;                      // the capture, or the first compiled call (which compiles)
  std::vector<double> eager_ns, replay_ns;  // per round
};

// The same op through PyTorch: the same values, shapes, dtype and device.
class PeerCall {
 public:
  virtual ~PeerCall() = default;
  virtual void call() = 0;  // one call; synchronises the device when it is a GPU
  virtual std::string expression() const = 0;  // "torch.matmul(a, b)"
  virtual std::string version() const = 0;     // "PyTorch 1.13.1 (4 intra-op threads)"
  virtual std::string work() const = 0;        // what one call does: "forward", "forward + y.sum().backward()"
  // Relative error of the last result against `strata_result` (|a-b| / |b| over all elements, float64).
  virtual double relative_difference(const Tensor& strata_result) = 0;
  // torch's result, as float64, of one plain call on copies of `fresh`'s inputs (converted as the peer's
  // own are; `fresh` is left as it was): an in-place op's comparison, on inputs no call has written.
  virtual std::vector<double> result_on(const frontend::PreparedCall& fresh) = 0;
  // `calls` calls under torch.profiler; rows with self times per call, and the profiler's resolution per
  // event when it is coarse (1000 ns when every reading was whole microseconds, else 0). Empty with `why`
  // set when the profiler is not available.
  virtual std::vector<reports::PeerReport::ProfileRow> profile(int calls, double& resolution_ns, std::string& why) = 0;
  // `warmup` untimed and `rounds` timed rounds of `k` calls, eager, then through torch's replay.
  virtual PeerRounds compare_rounds(int64_t k, int64_t warmup, int64_t rounds) = 0;
  // torch's rows: `calls` calls with probes on torch's entry points (Note [torch's rows] in
  // torch_layers.cpp), their spans added to `timeline`, the rows set in `report` (whose `wall` holds the
  // untraced calls already). Sets report.rows_note, and no rows, when this torch or platform offers no way
  // in; the probes are removed before it returns either way.
  virtual void layers(int calls, reports::PeerReport& report, Timeline& timeline) = 0;
};

}  // namespace strata::python_module

// The module's one exported name returns this table (python_embed.cpp). The types are C++ (same
// compiler, same build); the version guards against a stale file.
struct StrataPythonModule {
  int version = kStrataPythonModuleVersion;
  strata::python_module::PythonInfo (*describe)(const std::string& package_dir);
  // Imports strata from `package_dir` (starting the interpreter on first use) and binds `call` as
  // strata.<op>(...). Throws UnavailableError when the package cannot be imported.
  std::unique_ptr<strata::python_module::PythonCall> (*bind_strata)(const strata::frontend::PreparedCall& call,
                                                                     const std::string& package_dir);
  // The op through torch. Throws UnavailableError when torch is not importable or cannot run it here,
  // UsageError when the op has no torch counterpart.
  std::unique_ptr<strata::python_module::PeerCall> (*bind_torch)(const strata::frontend::PreparedCall& call,
                                                                  const std::string& package_dir,
                                                                  const strata::python_module::PeerOptions& options);
};

extern "C" const StrataPythonModule* strata_python_module_v1();

