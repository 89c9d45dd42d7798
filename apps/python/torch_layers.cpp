// The probes behind torch's rows (--peer torch): see Note [torch's rows].
#include "apps/python/torch_layers.h"

#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <tuple>

#include "lib/error.h"
#include "lib/host_clock.h"

// Note [torch's rows]
// ~~~~~~~~~~~~~~~~~~~
// torch's call is split at the entry points the unmodified wheel exposes, each timed by a probe while the
// measured calls run and removed after them:
//
//  - binding: the C function behind each torch._C builtin the call reaches (torch.matmul's, Tensor.add_'s).
//    CPython reads a builtin's function pointer from its PyMethodDef at every call, so the probe is that
//    pointer, swapped and put back.
//  - dispatch: every at::_ops::<op>::call and ::redispatch. libtorch_python and libtorch_cpu reach them,
//    also from inside libtorch_cpu (a kernel calling another op, a wrapper key handing on), through their
//    GOT: the probe is the GOT slot, rewritten and put back (the wheel is built without -Bsymbolic and
//    with lazy binding, so every such call goes through a slot; `readelf -r` lists them).
//  - library: the BLAS entry points (sgemm_, cblas_sgemm ...) and ATen's loop drivers
//    (TensorIteratorBase::for_each / serial_for_each), reached through the GOT the same way.
//
// A probe is one shared trampoline (x86-64 assembly below) reached from a small generated stub per entry
// point that loads the entry point's index. The trampoline saves the argument registers, records the
// entry (host clock, the first two integer arguments, c10's thread-local key sets), copies 16 words of the
// caller's stack arguments, calls the real function, and records the exit. It knows no signature, so one
// trampoline serves every op. Only the thread that installed the probes records; intra-op threads pass
// through. An exception thrown through a probe leaves its span open, which balanced() reports.
//
// The key of a redispatch span is read from its DispatchKeySet argument; of a call span, computed as the
// dispatcher computes it from the thread-local sets read at the call and the inputs' keys (torch_peer.cpp).

namespace strata::python_module::torch_layers {
namespace {

std::vector<ProbeSpan> g_spans;      // the recording thread's spans of the current call
std::vector<uint32_t> g_open;        // indices into g_spans of the probes entered and not yet left
void* const* g_real = nullptr;       // per target: the real entry point
const uint64_t* g_tls = nullptr;     // c10::impl::raw_local_dispatch_key_set of the recording thread
thread_local bool t_recording = false;

}  // namespace
}  // namespace strata::python_module::torch_layers

using strata::python_module::torch_layers::g_open;
using strata::python_module::torch_layers::g_real;
using strata::python_module::torch_layers::g_spans;
using strata::python_module::torch_layers::g_tls;
using strata::python_module::torch_layers::t_recording;

// Called by the trampoline: records the entry and returns where to forward.
extern "C" __attribute__((visibility("hidden"))) void* strata_torch_probe_enter(uint32_t target, uint64_t arg0,
                                                                                 uint64_t arg1) {
  if (t_recording) {
    strata::python_module::torch_layers::ProbeSpan s;
    s.target = target;
    s.parent = g_open.empty() ? -1 : static_cast<int32_t>(g_open.back());
    s.arg0 = arg0;
    s.arg1 = arg1;
    if (g_tls != nullptr) {
      s.tls_included = g_tls[0];
      s.tls_excluded = g_tls[1];
    }
    g_open.push_back(static_cast<uint32_t>(g_spans.size()));
    g_spans.push_back(s);
    g_spans.back().begin = strata::host_clock::ticks();
  }
  return g_real[target];
}

extern "C" __attribute__((visibility("hidden"))) void strata_torch_probe_leave(uint32_t /*target*/) {
  if (!t_recording || g_open.empty()) return;
  const uint64_t t = strata::host_clock::ticks();
  g_spans[g_open.back()].end = t;
  g_open.pop_back();
}

extern "C" __attribute__((visibility("hidden"), noinline)) void strata_torch_probe_empty() { asm volatile(""); }

// The trampoline. r11 holds the target index (set by the stub; no argument lives in r11). Frame: rbp, rbx
// (index), r12 (real entry point), then 320 bytes: 16 words of copied stack arguments at the bottom, the
// integer argument registers and rax (vararg count) above, xmm0-7 on top. rsp is 16-byte aligned at the
// inner call, as the ABI asks.
asm(R"(
  .text
  .p2align 4
  .globl strata_torch_probe_trampoline
  .hidden strata_torch_probe_trampoline
  .type strata_torch_probe_trampoline, @function
strata_torch_probe_trampoline:
  .cfi_startproc
  pushq %rbp
  .cfi_def_cfa_offset 16
  .cfi_offset %rbp, -16
  movq %rsp, %rbp
  .cfi_def_cfa_register %rbp
  pushq %rbx
  pushq %r12
  .cfi_offset %rbx, -24
  .cfi_offset %r12, -32
  subq $320, %rsp
  movq %rdi, 128(%rsp)
  movq %rsi, 136(%rsp)
  movq %rdx, 144(%rsp)
  movq %rcx, 152(%rsp)
  movq %r8, 160(%rsp)
  movq %r9, 168(%rsp)
  movq %rax, 176(%rsp)
  movdqu %xmm0, 192(%rsp)
  movdqu %xmm1, 208(%rsp)
  movdqu %xmm2, 224(%rsp)
  movdqu %xmm3, 240(%rsp)
  movdqu %xmm4, 256(%rsp)
  movdqu %xmm5, 272(%rsp)
  movdqu %xmm6, 288(%rsp)
  movdqu %xmm7, 304(%rsp)
  movl %r11d, %ebx
  movl %r11d, %edi
  movq 128(%rsp), %rsi
  movq 136(%rsp), %rdx
  call strata_torch_probe_enter
  movq %rax, %r12
  leaq 16(%rbp), %rsi
  movq %rsp, %rdi
  movl $16, %ecx
  rep movsq
  movq 128(%rsp), %rdi
  movq 136(%rsp), %rsi
  movq 144(%rsp), %rdx
  movq 152(%rsp), %rcx
  movq 160(%rsp), %r8
  movq 168(%rsp), %r9
  movq 176(%rsp), %rax
  movdqu 192(%rsp), %xmm0
  movdqu 208(%rsp), %xmm1
  movdqu 224(%rsp), %xmm2
  movdqu 240(%rsp), %xmm3
  movdqu 256(%rsp), %xmm4
  movdqu 272(%rsp), %xmm5
  movdqu 288(%rsp), %xmm6
  movdqu 304(%rsp), %xmm7
  call *%r12
  movq %rax, 128(%rsp)
  movq %rdx, 136(%rsp)
  movdqu %xmm0, 192(%rsp)
  movdqu %xmm1, 208(%rsp)
  movl %ebx, %edi
  call strata_torch_probe_leave
  movq 128(%rsp), %rax
  movq 136(%rsp), %rdx
  movdqu 192(%rsp), %xmm0
  movdqu 208(%rsp), %xmm1
  leaq -16(%rbp), %rsp
  popq %r12
  popq %rbx
  popq %rbp
  .cfi_def_cfa %rsp, 8
  ret
  .cfi_endproc
  .size strata_torch_probe_trampoline, .-strata_torch_probe_trampoline
)");

extern "C" void strata_torch_probe_trampoline();

namespace strata::python_module::torch_layers {
namespace {

constexpr size_t kStubBytes = 32;  // mov r11d, imm32 (6) + jmp [rip] (6) + address (8), padded

// The libraries whose GOT slots lead to torch's entry points.
bool is_torch_library(const std::string& path) {
  // The wheel's plain names, or a distribution's versioned ones (Debian's libtorch_cpu.so.1.13).
  const std::string file = path.substr(path.rfind('/') + 1);
  for (const char* name : {"libtorch_python.so", "libtorch_cpu.so", "libtorch.so"}) {
    const size_t n = std::strlen(name);
    if (file.compare(0, n, name) == 0 && (file.size() == n || file[n] == '.')) return true;
  }
  return false;
}

// "_ZN2at4_ops2mm4callE..." -> ("mm", "call"); false for anything else.
bool parse_op_symbol(const char* s, std::string& op, std::string& member) {
  static const char kPrefix[] = "_ZN2at4_ops";
  if (std::strncmp(s, kPrefix, sizeof kPrefix - 1) != 0) return false;
  const char* p = s + sizeof kPrefix - 1;
  auto read = [&p](std::string& out) {
    if (*p < '1' || *p > '9') return false;
    size_t n = 0;
    while (*p >= '0' && *p <= '9') n = n * 10 + size_t(*p++ - '0');
    if (std::strlen(p) < n) return false;
    out.assign(p, n);
    p += n;
    return true;
  };
  return read(op) && read(member) && *p == 'E' && (member == "call" || member == "redispatch");
}

// The kernel library's entry points that the wheel reaches through its GOT. MKL (statically inside
// libtorch_cpu) and OpenBLAS export the Fortran and CBLAS names; ATen's native loops all run under
// TensorIteratorBase's drivers.
bool is_library_symbol(const char* s) {
  static const char* const kExact[] = {"sgemm_", "dgemm_", "cblas_sgemm", "cblas_dgemm", "cblas_gemm_bf16bf16f32",
                                       "sbgemm_", "mkl_blas_sgemm_batch", "sgemv_", "dgemv_"};
  for (const char* e : kExact)
    if (std::strcmp(s, e) == 0) return true;
  return std::strncmp(s, "_ZN2at18TensorIteratorBase8for_each", 35) == 0 ||
         std::strncmp(s, "_ZN2at18TensorIteratorBase15serial_for_each", 44) == 0;
}

// The mappings of this process with their protections, from /proc/self/maps, read once per install or
// removal (thousands of slots, a few pages).
struct Mappings {
  std::vector<std::tuple<uintptr_t, uintptr_t, int>> ranges;
  Mappings() {
    std::ifstream maps("/proc/self/maps");
    std::string line;
    while (std::getline(maps, line)) {
      uintptr_t lo = 0, hi = 0;
      char perms[5] = {};
      if (std::sscanf(line.c_str(), "%lx-%lx %4s", &lo, &hi, perms) != 3) continue;
      ranges.emplace_back(lo, hi, (perms[0] == 'r' ? PROT_READ : 0) | (perms[1] == 'w' ? PROT_WRITE : 0) |
                                      (perms[2] == 'x' ? PROT_EXEC : 0));
    }
  }
  int protection(const void* address) const {
    const auto a = reinterpret_cast<uintptr_t>(address);
    for (const auto& [lo, hi, prot] : ranges)
      if (a >= lo && a < hi) return prot;
    return -1;
  }
};

// Writes one pointer-sized word, opening its page for writing when it is not writable and closing it after.
void write_word(const Mappings& maps, void** address, void* value) {
  const int prot = maps.protection(address);
  if (prot < 0) throw Error("a probe slot is in no mapping of this process");
  const long page = sysconf(_SC_PAGESIZE);
  void* base = reinterpret_cast<void*>(reinterpret_cast<uintptr_t>(address) & ~uintptr_t(page - 1));
  if ((prot & PROT_WRITE) == 0 && mprotect(base, size_t(page), prot | PROT_WRITE) != 0)
    throw Error("cannot open a probe slot for writing: " + std::string(std::strerror(errno)));
  __atomic_store_n(address, value, __ATOMIC_RELEASE);
  if ((prot & PROT_WRITE) == 0) mprotect(base, size_t(page), prot);
}

struct GotScan {
  std::vector<std::pair<std::string, void**>> slots;  // symbol, slot address
  std::vector<std::string> libraries;
};

int scan_library(dl_phdr_info* info, size_t /*size*/, void* data) {
  auto& scan = *static_cast<GotScan*>(data);
  const std::string path = info->dlpi_name != nullptr ? info->dlpi_name : "";
  if (!is_torch_library(path)) return 0;
  scan.libraries.push_back(path);
  const ElfW(Dyn)* dyn = nullptr;
  for (int i = 0; i < info->dlpi_phnum; ++i)
    if (info->dlpi_phdr[i].p_type == PT_DYNAMIC)
      dyn = reinterpret_cast<const ElfW(Dyn)*>(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
  if (dyn == nullptr) return 0;
  uintptr_t jmprel = 0, symtab = 0, strtab = 0;
  size_t pltrelsz = 0;
  for (; dyn->d_tag != DT_NULL; ++dyn) {
    if (dyn->d_tag == DT_JMPREL) jmprel = dyn->d_un.d_ptr;
    if (dyn->d_tag == DT_PLTRELSZ) pltrelsz = dyn->d_un.d_val;
    if (dyn->d_tag == DT_SYMTAB) symtab = dyn->d_un.d_ptr;
    if (dyn->d_tag == DT_STRTAB) strtab = dyn->d_un.d_ptr;
  }
  // glibc relocates these tags in place on x86-64; an unrelocated value is an offset from the load base.
  auto absolute = [&](uintptr_t v) { return v < info->dlpi_addr ? v + info->dlpi_addr : v; };
  if (jmprel == 0 || symtab == 0 || strtab == 0) return 0;
  const auto* rel = reinterpret_cast<const ElfW(Rela)*>(absolute(jmprel));
  const auto* syms = reinterpret_cast<const ElfW(Sym)*>(absolute(symtab));
  const auto* strs = reinterpret_cast<const char*>(absolute(strtab));
  for (size_t i = 0; i < pltrelsz / sizeof(ElfW(Rela)); ++i) {
    if (ELF64_R_TYPE(rel[i].r_info) != R_X86_64_JUMP_SLOT) continue;
    const char* name = strs + syms[ELF64_R_SYM(rel[i].r_info)].st_name;
    std::string op, member;
    if (!parse_op_symbol(name, op, member) && !is_library_symbol(name)) continue;
    scan.slots.emplace_back(name, reinterpret_cast<void**>(info->dlpi_addr + rel[i].r_offset));
  }
  return 0;
}

}  // namespace

Interposer::Interposer(const std::vector<PyObject*>& builtins) {
#if !defined(__x86_64__) || !defined(__linux__)
  throw UnavailableError("torch's rows need the x86-64 Linux probes (docs/torch-layers.md)");
#endif
  add_target({"strata_torch_probe_empty", ProbeKind::kCalibration, ""},
             reinterpret_cast<void*>(&strata_torch_probe_empty));
  for (PyObject* b : builtins) {
    PyMethodDef* def = nullptr;
    if (PyCFunction_Check(b)) def = reinterpret_cast<PyCFunctionObject*>(b)->m_ml;
    if (Py_IS_TYPE(b, &PyMethodDescr_Type)) def = reinterpret_cast<PyMethodDescrObject*>(b)->d_method;
    if (def == nullptr || def->ml_meth == nullptr) continue;
    Dl_info where{};
    // Only torch's own C functions are the binding; a builtin of Python or numpy the call reaches is not.
    if (dladdr(reinterpret_cast<void*>(def->ml_meth), &where) == 0 || where.dli_fname == nullptr ||
        std::strstr(where.dli_fname, "libtorch_python") == nullptr)
      continue;
    if (std::any_of(methods_.begin(), methods_.end(), [&](const MethodSlot& m) { return m.def == def; })) continue;
    const uint32_t t = add_target({def->ml_name, ProbeKind::kBinding, ""}, reinterpret_cast<void*>(def->ml_meth));
    methods_.push_back({def, def->ml_meth, t});
  }
  find_got_slots();
  // The recording thread's c10 key sets: dlsym of a thread-local symbol answers this thread's copy.
  // libc10 as mapped: the wheel's libc10.so, or a distribution's versioned one (libc10.so.1.13).
  std::string c10_path;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) {
        const std::string path = info->dlpi_name != nullptr ? info->dlpi_name : "";
        const std::string file = path.substr(path.rfind('/') + 1);
        if (file.rfind("libc10.so", 0) != 0) return 0;
        *static_cast<std::string*>(data) = path;
        return 1;
      },
      &c10_path);
  void* c10 = c10_path.empty() ? nullptr : dlopen(c10_path.c_str(), RTLD_NOLOAD | RTLD_LAZY);
  if (c10 != nullptr) {
    g_tls = static_cast<const uint64_t*>(dlsym(c10, "_ZN3c104impl26raw_local_dispatch_key_setE"));
    dlclose(c10);
  }
  // The stubs: one per target, `mov $index, %r11d; jmp *trampoline`.
  const long page = sysconf(_SC_PAGESIZE);
  stubs_size_ = (targets_.size() * kStubBytes + size_t(page) - 1) / size_t(page) * size_t(page);
  void* mem = mmap(nullptr, stubs_size_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) throw Error("cannot map the probes' stubs: " + std::string(std::strerror(errno)));
  stubs_ = mem;
  auto* code = static_cast<unsigned char*>(mem);
  const auto trampoline = reinterpret_cast<uint64_t>(&strata_torch_probe_trampoline);
  for (uint32_t i = 0; i < targets_.size(); ++i) {
    unsigned char* s = code + i * kStubBytes;
    s[0] = 0x41, s[1] = 0xBB;  // mov imm32, %r11d
    std::memcpy(s + 2, &i, 4);
    s[6] = 0xFF, s[7] = 0x25;  // jmp *0(%rip)
    std::memset(s + 8, 0, 4);
    std::memcpy(s + 12, &trampoline, 8);
  }
  if (mprotect(mem, stubs_size_, PROT_READ | PROT_EXEC) != 0)
    throw Error("cannot make the probes' stubs executable: " + std::string(std::strerror(errno)));
  g_real = real_.data();
}

Interposer::~Interposer() {
  remove();
  if (stubs_ != nullptr) munmap(stubs_, stubs_size_);
}

uint32_t Interposer::add_target(ProbeTarget target, void* real) {
  targets_.push_back(std::move(target));
  real_.push_back(real);
  return static_cast<uint32_t>(targets_.size() - 1);
}

void Interposer::find_got_slots() {
  GotScan scan;
  dl_iterate_phdr(scan_library, &scan);
  libraries_ = scan.libraries;
  if (scan.libraries.empty())
    throw UnavailableError("none of libtorch_python.so, libtorch_cpu.so, libtorch.so is mapped in this "
                           "process after `import torch`: torch's rows need them");
  std::vector<std::pair<std::string, uint32_t>> known;  // symbol -> target, sorted as found
  for (const auto& slot : scan.slots) {
    const std::string& name = slot.first;
    void** const address = slot.second;
    uint32_t t = 0;
    auto it = std::find_if(known.begin(), known.end(), [&](const auto& k) { return k.first == name; });
    if (it != known.end()) {
      t = it->second;
    } else {
      // Where the dynamic linker would resolve it: the torch libraries' scope (they are loaded
      // RTLD_LOCAL by torch's extension, so not always through RTLD_DEFAULT).
      void* real = dlsym(RTLD_DEFAULT, name.c_str());
      for (const std::string& lib : scan.libraries) {
        if (real != nullptr) break;
        void* h = dlopen(lib.c_str(), RTLD_NOLOAD | RTLD_LAZY);
        if (h == nullptr) continue;
        real = dlsym(h, name.c_str());
        dlclose(h);
      }
      if (real == nullptr) continue;
      std::string op, member;
      ProbeTarget target{name, ProbeKind::kLibrary, ""};
      if (parse_op_symbol(name.c_str(), op, member)) {
        target.kind = member == "call" ? ProbeKind::kOpCall : ProbeKind::kOpRedispatch;
        target.op_struct = op;
      }
      t = add_target(std::move(target), real);
      known.emplace_back(name, t);
    }
    slots_.push_back({address, nullptr, t});
  }
  const bool any_op = std::any_of(targets_.begin(), targets_.end(),
                                  [](const ProbeTarget& t) { return t.kind == ProbeKind::kOpCall; });
  if (!any_op)
    throw UnavailableError("no at::_ops::<op>::call entry point is reached through the GOT of " +
                           scan.libraries.front() + " (a wheel built with -Bsymbolic, or stripped): torch's "
                           "dispatch rows cannot be measured in this build");
}

void Interposer::install() {
  if (installed_) return;
  g_real = real_.data();
  g_spans.clear();
  g_open.clear();
  auto* code = static_cast<unsigned char*>(stubs_);
  const Mappings maps;
  for (Slot& s : slots_) {
    s.original = *s.address;
    write_word(maps, s.address, code + s.target * kStubBytes);
  }
  for (MethodSlot& m : methods_) {
    m.original = m.def->ml_meth;
    write_word(maps, reinterpret_cast<void**>(&m.def->ml_meth), code + m.target * kStubBytes);
  }
  t_recording = true;
  installed_ = true;
}

void Interposer::remove() {
  if (!installed_) return;
  t_recording = false;
  const Mappings maps;
  for (auto it = methods_.rbegin(); it != methods_.rend(); ++it)
    write_word(maps, reinterpret_cast<void**>(&it->def->ml_meth), reinterpret_cast<void*>(it->original));
  for (auto it = slots_.rbegin(); it != slots_.rend(); ++it) write_word(maps, it->address, it->original);
  installed_ = false;
}

ProbeCost Interposer::calibrate() {
  using Fn = void (*)();
  auto* volatile direct = &strata_torch_probe_empty;
  auto* volatile probed = reinterpret_cast<Fn>(static_cast<unsigned char*>(stubs_));  // target 0
  const bool was_recording = t_recording;
  t_recording = true;
  constexpr int kCalls = 2000, kRounds = 31;
  std::vector<double> outer, inner;
  for (int r = 0; r < kRounds; ++r) {
    uint64_t t0 = host_clock::ticks();
    for (int i = 0; i < kCalls; ++i) direct();
    const double direct_ns = host_clock::elapsed_ns(t0) / kCalls;
    g_spans.clear();
    g_spans.reserve(kCalls);
    g_open.clear();
    t0 = host_clock::ticks();
    for (int i = 0; i < kCalls; ++i) probed();
    const double probed_ns = host_clock::elapsed_ns(t0) / kCalls;
    double in = 0;
    for (const ProbeSpan& s : g_spans) in += double(host_clock::ticks_to_ns(s.end) - host_clock::ticks_to_ns(s.begin));
    in = in / kCalls - direct_ns;
    inner.push_back(std::max(0.0, in));
    outer.push_back(std::max(0.0, probed_ns - direct_ns - std::max(0.0, in)));
  }
  g_spans.clear();
  t_recording = was_recording;
  std::sort(outer.begin(), outer.end());
  std::sort(inner.begin(), inner.end());
  return {outer[outer.size() / 2], inner[inner.size() / 2]};
}

bool Interposer::restored() const {
  if (installed_) return false;
  for (const Slot& s : slots_)
    if (s.original != nullptr && *s.address != s.original) return false;
  for (const MethodSlot& m : methods_)
    if (m.original != nullptr && m.def->ml_meth != m.original) return false;
  return true;
}

void Interposer::begin_call() {
  g_spans.clear();
  g_open.clear();
}

const std::vector<ProbeSpan>& Interposer::spans() const { return g_spans; }

bool Interposer::balanced() const { return g_open.empty(); }

bool Interposer::read_tls(uint64_t& included, uint64_t& excluded) const {
  if (g_tls == nullptr) return false;
  included = g_tls[0];
  excluded = g_tls[1];
  return true;
}

}  // namespace strata::python_module::torch_layers
