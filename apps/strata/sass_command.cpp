// `strata sass`: what machine code libstrata_cuda.so carries (docs/compiled.md, "SASS"): the toolkit's
// cuobjdump lists it, layers/compiler/sass.h reads the listing, and this prints the embedded architectures
// and each kernel's instruction mix. Runs on any machine with cuobjdump: it reads a file, not a GPU.
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iomanip>
#include <iostream>
#include <string>

#include "apps/strata/commands.h"
#include "layers/compiler/sass.h"
#include "lib/error.h"
#include "lib/input_file.h"
#include "measure/devices/module_file.h"

namespace strata::app {
namespace {

std::string joined(const std::vector<std::string>& items) {
  std::string s;
  for (const std::string& i : items) s += (s.empty() ? "" : " ") + i;
  return s.empty() ? "none" : s;
}

// "add_kernel<__half>" out of "void strata::kernels::cuda::(anonymous namespace)::add_kernel<__half>(...)":
// the table's last column, where a reader looks for the kernel; the full name is one --module away.
std::string short_name(const std::string& demangled) {
  std::string s = demangled;
  // The parameter list is the balanced group at the end; "(anonymous namespace)" is another one.
  if (!s.empty() && s.back() == ')') {
    int depth = 0;
    for (size_t i = s.size(); i-- > 0;) {
      depth += s[i] == ')' ? 1 : s[i] == '(' ? -1 : 0;
      if (depth == 0) {
        s.resize(i);
        break;
      }
    }
  }
  int depth = 0;
  size_t cut = 0;  // just after the last "::" or space outside template arguments: drops scopes and "void "
  for (size_t i = 0; i < s.size(); ++i) {
    depth += s[i] == '<' ? 1 : s[i] == '>' ? -1 : 0;
    if (depth == 0 && s[i] == ':' && i + 1 < s.size() && s[i + 1] == ':') cut = i + 2;
    if (depth == 0 && s[i] == ' ' && s.compare(i + 1, 10, "namespace)") != 0) cut = i + 1;
  }
  return s.substr(cut);
}

}  // namespace

int run_sass(const std::string& module_option) {
  std::string why;
  const std::string cuobjdump = compiler::find_cuda_tool("cuobjdump", why);
  if (cuobjdump.empty()) {
    throw UnavailableError("strata sass needs cuobjdump: " + why + "; " + compiler::kDisassemblerHowTo);
  }
  std::string module = module_option;
  if (module.empty()) {
#ifdef STRATA_CUDA_MODULE_BUILD_PATH
    module = measure::find_module_file("libstrata_cuda.so", "STRATA_CUDA_MODULE", STRATA_CUDA_MODULE_BUILD_PATH, why);
#else
    why = "this build has no CUDA layers, so no libstrata_cuda.so; name a module with --module";
#endif
    if (module.empty()) throw UnavailableError("strata sass: " + why);
  } else if (const std::string why = check_regular_file(module); !why.empty()) {
    // cuobjdump would wait forever on a FIFO (Note [Reading a file strata did not write]).
    throw UsageError("--module " + quote_typed(module) + ": it " + why + "; give a shared object or executable file");
  }
  const compiler::EmbeddedCode code =
      compiler::parse_cuobjdump_list(compiler::run_tool({cuobjdump, "--list-elf", "--list-ptx", module}));
  const std::vector<compiler::SassFunction> functions =
      compiler::parse_sass(compiler::run_tool({cuobjdump, "-sass", module}));

  std::cout << "module: " << module << "\ncuobjdump: " << cuobjdump
            << "\nembedded SASS: " << joined(code.sass_archs) << "\nembedded PTX: " << joined(code.ptx_archs)
            << "\nkernels: " << functions.size() << "\n\n";
  std::cout << std::left << std::setw(6) << "arch" << std::right << std::setw(7) << "instrs";
  for (int c = 0; c < compiler::kSassClassCount; ++c) {
    std::cout << std::setw(10) << compiler::sass_class_name(static_cast<compiler::SassClass>(c));
  }
  std::cout << "  kernel\n";
  for (const compiler::SassFunction& f : functions) {
    const compiler::SassMix mix = compiler::instruction_mix(f);
    std::cout << std::left << std::setw(6) << f.arch << std::right << std::setw(7) << mix.total;
    for (const int64_t n : mix.counts) std::cout << std::setw(10) << n;
    std::cout << "  " << short_name(f.demangled) << "\n";
  }
  return 0;
}

}  // namespace strata::app
