// --frontend python and --peer torch for trace and compare, and the Python lines of `strata devices`
// (Note [The Python module] in apps/python/python_module_abi.h). Compiled in every build: without the
// Python module they say why there is none.
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <vector>

#include "apps/strata/prepared_trace.h"
#include "lib/timeline.h"
#include "reports/model/report.h"

namespace strata::app {

// Refuses a --frontend or --peer value that is not one of the allowed ones (UsageError), before anything
// is loaded or allocated.
void check_frontend_options(const TraceOptions& options);

// For --frontend python: binds strata.<op>(...) in the embedded interpreter to the prepared inputs (the
// same tensors the CLI path uses) and sets prepared.invoke. For --peer torch: makes torch's inputs from
// the same values. UnavailableError (exit 4) when the module, the package or torch is missing.
void prepare_python(Prepared& prepared, const TraceOptions& options);

// The frontend's words for the report ("strata.matmul(self, other) in the embedded python ..."); "" for cli.
std::string frontend_description(const Prepared& prepared);

// --peer torch: a cold call, `warmup` warm-ups and `repeat` timed calls of the peer, each timed on the host
// clock; one span per timed call into `timeline` (for the Chrome trace), then torch.profiler's figures
// and the relative difference from `strata_result` (for an in-place op, of one call each on fresh inputs).
reports::PeerReport run_peer(Prepared& prepared, const TraceOptions& options, int64_t warmup, int64_t repeat, const binding::IValue& strata_result,
                             const std::vector<double>& strata_untraced_ns, Timeline& timeline);

// `strata devices`: which Python --frontend python would use, where the strata package is, and torch.
void print_python_info(std::ostream& out);

}  // namespace strata::app
