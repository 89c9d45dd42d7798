// torch's call split into strata's rows (--peer torch): the probes that time PyTorch's own entry points in
// the unmodified wheel, installed for the measured calls and removed after them. Private to
// libstrata_python.so; see Note [torch's rows] in torch_layers.cpp and docs/torch-layers.md.
#pragma once

#include <Python.h>

#include <cstdint>
#include <string>
#include <vector>

namespace strata::python_module::torch_layers {

// What a probed entry point is, which decides its row.
enum class ProbeKind : uint8_t {
  kCalibration,   // strata's own empty function, timed through a probe to measure the probe's cost
  kBinding,       // a torch._C builtin's C function (libtorch_python): argument parsing, wrapping tensors
  kOpCall,        // at::_ops::<op>::call: the dispatcher's entry, then the highest key's kernel
  kOpRedispatch,  // at::_ops::<op>::redispatch: a wrapper key handing on with a key set it passes
  kLibrary,       // the kernel library: the BLAS routine, ATen's TensorIterator loop driver
};

struct ProbeTarget {
  std::string symbol;     // the mangled name, or the builtin's name for a binding
  ProbeKind kind = ProbeKind::kCalibration;
  std::string op_struct;  // "add_Tensor" for at::_ops::add_Tensor::call; "" otherwise
};

// One probed call on the recording thread: [begin, end] read inside the probe, on the host clock.
struct ProbeSpan {
  uint32_t target = 0;
  int32_t parent = -1;  // index of the enclosing span in the same call, -1 at the top
  uint64_t begin = 0, end = 0;
  uint64_t arg0 = 0, arg1 = 0;  // the first two integer arguments (rdi, rsi): where a redispatch's key set is
  uint64_t tls_included = 0, tls_excluded = 0;  // c10's thread-local key sets as stored, at entry
};

// The probe's cost, measured on strata's empty function: `outer_ns` is what one probed call adds to its
// caller's time outside the span it records, `inner_ns` what it adds inside that span.
struct ProbeCost {
  double outer_ns = 0;
  double inner_ns = 0;
};

// The probes over the loaded torch libraries. Construction finds the entry points (the GOT slots of
// libtorch_python, libtorch_cpu and libtorch that reach them, and the builtins' method tables) and
// changes nothing; install() redirects them for the calling thread's recording, remove() puts back every
// byte it changed. Throws UnavailableError when the platform or the wheel offers no way in.
class Interposer {
 public:
  explicit Interposer(const std::vector<PyObject*>& builtins);
  ~Interposer();
  Interposer(const Interposer&) = delete;
  Interposer& operator=(const Interposer&) = delete;

  void install();
  void remove();
  // Every slot and method pointer install() changed holds its old value again (after remove()).
  bool restored() const;
  ProbeCost calibrate();  // between install() and remove() or not: it uses its own stub only

  void begin_call();                       // a new call's spans start
  const std::vector<ProbeSpan>& spans() const;  // every span since the last begin_call()
  bool balanced() const;                   // every probe entered was left (no exception went through one)
  const std::vector<ProbeTarget>& targets() const { return targets_; }
  size_t got_slots() const { return slots_.size(); }
  // c10's thread-local key sets as stored (raw_local_dispatch_key_set), read now on this thread; false
  // when libc10 does not export it.
  bool read_tls(uint64_t& included, uint64_t& excluded) const;

 private:
  struct Slot {
    void** address;
    void* original = nullptr;
    uint32_t target;
  };
  struct MethodSlot {
    PyMethodDef* def;
    PyCFunction original = nullptr;
    uint32_t target;
  };
  uint32_t add_target(ProbeTarget target, void* real);
  void find_got_slots();

  std::vector<ProbeTarget> targets_;
  std::vector<void*> real_;  // per target: where the probe forwards to
  std::vector<Slot> slots_;
  std::vector<std::string> libraries_;  // the torch libraries found, full paths
  std::vector<MethodSlot> methods_;
  void* stubs_ = nullptr;
  size_t stubs_size_ = 0;
  bool installed_ = false;
};

}  // namespace strata::python_module::torch_layers
