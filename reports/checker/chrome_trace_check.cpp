// The Chrome-trace checker: every invariant strata's traces keep (reports/checker/chrome_trace_check.h), checked
// on any trace text. A program of its own beside the writer (chrome_trace.cpp): `strata check-trace`, the
// tests and the fuzzer run it on traces strata did not write.
#include "reports/checker/chrome_trace_check.h"
#include "reports/model/units.h"
#include "reports/model/report.h"

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <new>
#include <optional>
#include <set>
#include <string_view>
#include <tuple>
#include <unordered_map>

#include <nlohmann/json.hpp>

namespace strata::reports {

namespace {

// The name of a ProfilerStep#N event, or nullptr for any other event.
const std::string* step_name(const nlohmann::json& e) {
  const auto name = e.find("name");
  if (name == e.end() || !name->is_string()) return nullptr;
  const std::string& n = name->get_ref<const std::string&>();
  constexpr std::string_view kPrefix = "ProfilerStep#";
  if (!n.starts_with(kPrefix) || n.size() == kPrefix.size() || n.size() > kPrefix.size() + 18) return nullptr;
  for (size_t i = kPrefix.size(); i < n.size(); ++i)
    if (n[i] < '0' || n[i] > '9') return nullptr;
  return &n;
}

// The args HTA joins host and GPU events on, for the categories that must carry them.
void check_args(const std::string& where, const nlohmann::json& e, std::vector<std::string>& errors) {
  const auto cat = e.find("cat");
  if (cat == e.end() || !cat->is_string()) return;
  const std::string& c = cat->get_ref<const std::string&>();
  const bool gpu = c == "kernel" || c == "gpu_memcpy" || c == "gpu_memset";
  const bool api = c == "cuda_runtime" || c == "cuda_driver";
  if (!gpu && !api) return;
  const auto args = e.find("args");
  auto integer_arg = [&](const char* key) -> std::optional<int64_t> {
    if (args == e.end() || !args->is_object()) return std::nullopt;
    const auto it = args->find(key);
    if (it == args->end() || !it->is_number_integer()) return std::nullopt;
    return it->get<int64_t>();
  };
  if (!integer_arg("correlation")) errors.push_back(where + ": " + c + " event without an integer args.correlation");
  if (gpu) {
    const std::optional<int64_t> stream = integer_arg("stream");
    if (!stream || *stream <= 0)
      errors.push_back(where + ": " + c + " event without an integer args.stream > 0 (HTA's mark of a GPU event)");
  } else {
    if (!integer_arg("cbid")) errors.push_back(where + ": " + c + " event without an integer args.cbid");
    if (args != e.end() && args->is_object() && args->contains("stream"))
      errors.push_back(where + ": " + c + " event with args.stream (HTA would take it for a GPU event)");
  }
}

// The phases of the Trace Event Format (duration B/E, complete X, instant i/I, counter C, async b/n/e and
// the legacy S/T/p/F, flow s/t/f, sample P, object N/O/D, metadata M, memory dump V/v, mark R, clock sync
// c, context ( and )). Anything else is no event a viewer knows how to draw.
bool known_phase(const std::string& ph) {
  static const std::set<std::string> kPhases = {"B", "E", "X", "i", "I", "C", "b", "n", "e", "S", "T", "p", "F", "s",
                                               "t", "f", "P", "N", "O", "D", "M", "V", "v", "R", "c", "(", ")"};
  return kPhases.count(ph) != 0;
}

// Note [Duplicate keys]: JSON that is valid but ambiguous is refused too. A key given twice in one object
// is one value to one reader and the other to the next (nlohmann keeps the last, a streaming reader may
// keep the first), so each duplicate is reported. Found by a SAX pass that builds nothing: nlohmann's
// parse callback would do it in the same pass, but its DOM builder then rescans the enclosing array at
// every object's end, which is quadratic in the number of events (seconds for 100k).
class DuplicateKeys final : public nlohmann::json_sax<nlohmann::json> {
 public:
  explicit DuplicateKeys(std::vector<std::string>& errors) : errors_(errors) {}
  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override {
    keys_.emplace_back();
    return true;
  }
  bool key(string_t& key) override {
    if (!keys_.back().insert(key).second && errors_.size() < 20)
      errors_.push_back("key '" + key + "' appears twice in one object (readers disagree on which value counts)");
    return true;
  }
  bool end_object() override {
    keys_.pop_back();
    return true;
  }
  bool start_array(std::size_t) override { return true; }
  bool end_array() override { return true; }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override { return false; }

 private:
  std::vector<std::string>& errors_;
  std::vector<std::set<std::string>> keys_;  // one set per object open at this point of the text
};

// An integer JSON number that fits int64 (nlohmann holds 2^63 and up as unsigned: reading one as int64
// would wrap it to a negative number, and a tid of 2^64 - 1 would be reported as "-1").
bool fits_int64(const nlohmann::json& v) {
  return v.is_number_integer() &&
         (!v.is_number_unsigned() || v.get<uint64_t>() <= uint64_t(std::numeric_limits<int64_t>::max()));
}

// What every event must be, whatever its phase: a known phase, pid and tid not negative and within int64
// (tid 0 is checked with the tracks), and args, when given, an object (readers look names up in it).
// False when pid or tid was reported here (out of range), so the caller does not report it again.
bool check_event_fields(const std::string& where, const nlohmann::json& e, std::vector<std::string>& errors) {
  const std::string& ph = e["ph"].get_ref<const std::string&>();
  if (!known_phase(ph)) errors.push_back(where + ": unknown phase '" + ph + "' (not a Trace Event Format phase)");
  bool ids_reported = false;
  for (const char* key : {"pid", "tid"}) {
    const auto it = e.find(key);
    if (it == e.end() || !it->is_number_integer()) continue;
    if (!fits_int64(*it)) {
      errors.push_back(where + ": " + key + " " + it->dump() + " is out of range (at most 2^63 - 1)");
      ids_reported = true;
    } else if (it->get<int64_t>() < 0) {
      errors.push_back(where + ": " + key + " " + std::to_string(it->get<int64_t>()) + " is negative");
    }
  }
  if (const auto args = e.find("args"); args != e.end() && !args->is_object())
    errors.push_back(where + ": args is " + args->type_name() + ", not an object");
  return !ids_reported;
}

// Duration events: on each track every B is closed by a later E, innermost first, and not before it began
// (an E earlier than its B is a negative duration, which viewers draw nowhere or backwards).
class BeginEndPairs {
 public:
  void add(const std::string& where, const std::string& ph, std::pair<int64_t, int64_t> track, double ts,
           std::vector<std::string>& errors) {
    std::vector<Open>& open = open_[track];
    if (ph == "B") open.push_back({where, ts});
    if (ph != "E") return;
    if (open.empty()) {
      errors.push_back(where + ": E event with no open B event on its track");
      return;
    }
    if (ts < open.back().ts)
      errors.push_back(where + ": E event at ts " + format_number(ts) + " us ends before its B (" +
                       open.back().where + ") began at ts " + format_number(open.back().ts) + " us");
    open.pop_back();
  }
  void finish(std::vector<std::string>& errors) const {
    for (const auto& [track, open] : open_)
      for (const Open& b : open)
        errors.push_back(b.where + ": B event never closed by an E event on its track");
  }

 private:
  struct Open {
    std::string where;
    double ts;
  };
  std::map<std::pair<int64_t, int64_t>, std::vector<Open>> open_;
};

// The text as a JSON document, or the one line that says why it is none. Duplicate keys are reported into
// `errors` and parsing goes on (Note [Duplicate keys]).
std::optional<nlohmann::json> parse_trace(const std::string& text, std::vector<std::string>& errors,
                                          std::string& refusal) {
  // A NUL is no JSON text; a reader that stops at it would see a different trace than one that does not.
  if (const size_t nul = text.find('\0'); nul != std::string::npos) {
    refusal = "byte " + std::to_string(nul) + " is a NUL: a trace is JSON text, and readers disagree on what follows it";
    return std::nullopt;
  }
  nlohmann::json doc;
  try {
    DuplicateKeys duplicates(errors);  // Note [Duplicate keys]; first, while no document takes memory
    nlohmann::json::sax_parse(text, &duplicates);
    doc = nlohmann::json::parse(text);  // strict JSON: NaN and Infinity are parse errors
  } catch (const std::bad_alloc&) {
    throw;  // the machine's limit, not the trace's fault: the caller says so
  } catch (const std::exception& e) {
    refusal = std::string("not valid JSON: ") + e.what();
    return std::nullopt;
  }
  if (!doc.is_object() || !doc.contains("traceEvents") || !doc["traceEvents"].is_array()) {
    refusal = "top level must be an object with a traceEvents array";
    return std::nullopt;
  }
  return doc;
}

// The header fields HTA reads (Note [Kineto trace layout]), where the trace has them.
void check_header(const nlohmann::json& doc, std::vector<std::string>& errors) {
  if (auto it = doc.find("distributedInfo"); it != doc.end()) {
    const auto rank = it->is_object() ? it->find("rank") : it->end();
    if (!it->is_object() || rank == it->end() || !rank->is_number_integer() || rank->get<int64_t>() < 0)
      errors.push_back("distributedInfo must be an object with an integer rank >= 0 (HTA reads the rank from it)");
  }
  if (auto it = doc.find("deviceProperties"); it != doc.end()) {
    bool flat = it->is_array() && !it->empty();
    if (flat) {
      for (const auto& gpu : *it) {
        if (!gpu.is_object()) flat = false;
        else
          for (const auto& [key, value] : gpu.items())
            if (value.is_structured()) flat = false;
      }
    }
    if (!flat) errors.push_back("deviceProperties must be a non-empty array of flat objects (HTA's metadata reader)");
  }
}

// A crafted or foreign trace may carry any JSON type anywhere: every field is type-checked before it
// is read, so malformed input gives a line in the report, never an exception.
std::optional<int64_t> integer_field(const nlohmann::json& e, const char* key) {
  auto it = e.find(key);
  if (it == e.end() || !fits_int64(*it)) return std::nullopt;
  return it->get<int64_t>();
}

int64_t to_ns(double us) { return static_cast<int64_t>(std::llround(us * 1000.0)); }

// Beyond this many microseconds (about 127 years) a time no longer fits int64 nanoseconds once a
// duration is added to it; such a trace is refused rather than wrapped.
constexpr double kMaxUs = 4e15;

using Track = std::pair<int64_t, int64_t>;  // pid, tid

std::string track_name(const Track& track) {
  return "track pid " + std::to_string(track.first) + " tid " + std::to_string(track.second);
}

// The checks across events: each event is read once (add), what must hold between events (nesting on a
// track, steps, flows) is checked at the end (finish).
class TraceEvents {
 public:
  explicit TraceEvents(std::vector<std::string>& errors) : errors_(errors) {}
  void add(const std::string& where, const nlohmann::json& e);
  void finish();

 private:
  struct Slice {
    int64_t begin, end;  // ns, exact from the three-decimal us
  };
  struct Step {
    int64_t begin, end;
    std::string name;
  };
  struct Flow {
    int starts = 0, ends = 0;
  };
  void check_step_name(const std::string& where, const nlohmann::json& e, const std::string& ph);
  std::optional<double> timestamp(const std::string& where, const nlohmann::json& e);
  void add_complete(const std::string& where, const nlohmann::json& e, const Track& track, double ts);
  void add_flow_point(const std::string& where, const nlohmann::json& e, const std::string& ph, const Track& track,
                      double ts);
  void check_nesting();
  void check_steps();
  void check_flows();

  std::vector<std::string>& errors_;
  BeginEndPairs begin_end_;
  std::map<Track, std::vector<Step>> steps_;
  std::set<std::string> step_names_;
  std::map<Track, std::vector<Slice>> tracks_;
  std::map<int64_t, Flow> flows_;
  std::vector<std::tuple<Track, int64_t, int64_t>> flow_points_;  // track, ts, id
};

void TraceEvents::check_step_name(const std::string& where, const nlohmann::json& e, const std::string& ph) {
  if (const std::string* name = step_name(e); name && ph != "X") {
    errors_.push_back(where + ": " + *name + " must be a complete (X) event enclosing its step");
  }
  if (const auto name = e.find("name"); name != e.end() && name->is_string() &&
      name->get<std::string>().starts_with("ProfilerStep") && !step_name(e)) {
    errors_.push_back(where + ": '" + name->get<std::string>() + "' is not ProfilerStep#N (HTA reads N as the step)");
  }
}

std::optional<double> TraceEvents::timestamp(const std::string& where, const nlohmann::json& e) {
  if (!e.contains("ts") || !e["ts"].is_number()) {
    errors_.push_back(where + ": missing numeric ts");
    return std::nullopt;
  }
  const double ts = e["ts"].get<double>();
  if (!std::isfinite(ts) || ts < 0) {
    errors_.push_back(where + ": ts " + format_number(ts) + " is negative or not finite");
    return std::nullopt;
  }
  if (ts > kMaxUs) {
    errors_.push_back(where + ": ts " + format_number(ts) + " us is out of range");
    return std::nullopt;
  }
  return ts;
}

void TraceEvents::add(const std::string& where, const nlohmann::json& e) {
  if (!e.is_object() || !e.contains("ph") || !e["ph"].is_string()) {
    errors_.push_back(where + ": not an object with 'ph'");
    return;
  }
  const std::string ph = e["ph"].get<std::string>();
  const bool ids_unreported = check_event_fields(where, e, errors_);
  check_step_name(where, e, ph);
  const std::optional<int64_t> pid = integer_field(e, "pid"), tid = integer_field(e, "tid");
  if (!pid || !tid) {
    if (ids_unreported) errors_.push_back(where + ": missing pid/tid, or not integers");
    return;
  }
  if (*tid == 0) errors_.push_back(where + ": tid is 0");
  const std::optional<double> ts = timestamp(where, e);
  if (!ts) return;
  const Track track{*pid, *tid};
  begin_end_.add(where, ph, track, *ts, errors_);
  if (ph == "X") add_complete(where, e, track, *ts);
  else if (ph == "s" || ph == "f") add_flow_point(where, e, ph, track, *ts);
}

void TraceEvents::add_complete(const std::string& where, const nlohmann::json& e, const Track& track, double ts) {
  if (!e.contains("dur") || !e["dur"].is_number() || e["dur"].get<double>() < 0) {
    errors_.push_back(where + ": X event without a non-negative dur");
    return;
  }
  const double dur = e["dur"].get<double>();
  if (dur > kMaxUs) {
    errors_.push_back(where + ": dur " + format_number(dur) + " us is out of range");
    return;
  }
  const int64_t b = to_ns(ts);
  tracks_[track].push_back({b, b + to_ns(dur)});
  check_args(where, e, errors_);
  if (const std::string* name = step_name(e)) {
    if (!step_names_.insert(*name).second) errors_.push_back(where + ": " + *name + " appears more than once");
    steps_[track].push_back({b, b + to_ns(dur), *name});
  }
}

void TraceEvents::add_flow_point(const std::string& where, const nlohmann::json& e, const std::string& ph,
                                 const Track& track, double ts) {
  const std::optional<int64_t> id = integer_field(e, "id");
  if (!id) {
    errors_.push_back(where + ": flow event without id (an integer, at most 2^63 - 1)");
    return;
  }
  (ph == "s" ? flows_[*id].starts : flows_[*id].ends)++;
  flow_points_.emplace_back(track, to_ns(ts), *id);
}

void TraceEvents::check_nesting() {
  for (auto& [track, slices] : tracks_) {
    std::sort(slices.begin(), slices.end(), [](const Slice& a, const Slice& b) {
      return a.begin != b.begin ? a.begin < b.begin : a.end > b.end;
    });
    std::vector<Slice> stack;
    for (const Slice& s : slices) {
      while (!stack.empty() && stack.back().end <= s.begin) stack.pop_back();
      if (!stack.empty() && s.end > stack.back().end) {
        errors_.push_back(track_name(track) + ": X events overlap without nesting ([" + std::to_string(stack.back().begin) +
                          ", " + std::to_string(stack.back().end) + "] and [" + std::to_string(s.begin) + ", " +
                          std::to_string(s.end) + "] ns)");
        continue;
      }
      stack.push_back(s);
    }
  }
}

void TraceEvents::check_steps() {
  for (auto& [track, list] : steps_) {
    std::sort(list.begin(), list.end(), [](const Step& a, const Step& b) { return a.begin < b.begin; });
    for (size_t i = 1; i < list.size(); ++i) {
      if (list[i].begin < list[i - 1].end) {
        errors_.push_back(track_name(track) + ": " + list[i - 1].name + " and " + list[i].name +
                          " overlap (a host event would be in two steps)");
      }
    }
  }
}

void TraceEvents::check_flows() {
  for (const auto& [id, f] : flows_) {
    if (f.starts != 1 || f.ends != 1) {
      errors_.push_back("flow id " + std::to_string(id) + " has " + std::to_string(f.starts) + " start(s) and " +
                        std::to_string(f.ends) + " end(s); expected one each");
    }
  }
  for (const auto& [track, ts, id] : flow_points_) {
    bool inside = false;
    if (auto it = tracks_.find(track); it != tracks_.end()) {
      inside = std::any_of(it->second.begin(), it->second.end(),
                           [ts = ts](const Slice& s) { return s.begin <= ts && ts <= s.end; });
    }
    if (!inside) errors_.push_back("flow id " + std::to_string(id) + " has an endpoint outside every X event on its track");
  }
}

void TraceEvents::finish() {
  begin_end_.finish(errors_);
  check_nesting();
  check_steps();
  check_flows();
}

}  // namespace

std::vector<std::string> check_chrome_trace(const std::string& text) {
  std::vector<std::string> errors;
  std::string refusal;
  const std::optional<nlohmann::json> doc = parse_trace(text, errors, refusal);
  if (!doc) return {refusal};
  const nlohmann::json& events = (*doc)["traceEvents"];
  if (events.empty()) errors.push_back("traceEvents is empty: a trace with no events records nothing");
  check_header(*doc, errors);
  TraceEvents checked(errors);
  size_t index = 0;
  for (const auto& e : events) checked.add("event " + std::to_string(index++), e);
  checked.finish();
  return errors;
}

}  // namespace strata::reports
