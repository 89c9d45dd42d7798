// The subcommands of the strata program, as main.cpp calls them. Each returns the process exit code
// (lib/error.h). What each is asked for lives beside the command that reads it: trace_request.h,
// compare_request.h, sweep_request.h.
#pragma once

#include <string>

#include "apps/strata/compare_request.h"
#include "apps/strata/sweep_request.h"
#include "apps/strata/trace_request.h"

namespace strata::app {

int run_trace(const TraceOptions& options);
// --count instructions: runs this command line again under callgrind, returns its exit code
// (count_instructions.cpp, Note [Instructions per row] in measure/instruction_count.h).
int run_trace_under_callgrind();
int run_sweep(const SweepOptions& options);
int run_compare(const CompareOptions& options);
int run_ops();
int run_check_trace(const std::string& path);  // exit 0 when valid, 1 with one line per violation
// `strata sass [--module PATH]` (sass_command.cpp): the SASS and PTX libstrata_cuda.so (or PATH) embeds and
// each kernel's instruction mix, by the toolkit's cuobjdump; UnavailableError (exit 4) without cuobjdump.
int run_sass(const std::string& module);

}  // namespace strata::app
