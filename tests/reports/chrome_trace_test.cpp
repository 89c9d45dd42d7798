// The Chrome trace writer and its validator (reports/formats/chrome_trace.cpp). The writer's output must pass
// check_chrome_trace for every kind of timeline; the validator must reject each violation of
// The invariants of docs/design.md ("Chrome trace invariants") on crafted traces, and never throw on malformed input.
#include "reports/formats/chrome_trace.h"
#include "reports/checker/chrome_trace_check.h"
#include "reports/formats/json_text.h"

#include <doctest/doctest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "lib/zone.h"
#include "tests/reports/steady_clock.h"

using namespace strata;
using namespace strata::reports;

namespace {

std::string joined(const std::vector<std::string>& errors) {
  std::string s;
  for (const std::string& e : errors) s += e + "\n";
  return s;
}

// A trace around `events` (a JSON array body).
std::string trace(const std::string& events) { return "{\"traceEvents\":[" + events + "]}"; }

bool rejects(const std::string& text, const std::string& expected) {
  std::vector<std::string> errors;
  try {
    errors = check_chrome_trace(text);
  } catch (const std::exception& e) {
    FAIL("check_chrome_trace threw: " << std::string(e.what()));
  }
  const std::string all = joined(errors);
  INFO(all);
  return !errors.empty() && all.find(expected) != std::string::npos;
}

Timeline device_timeline() {
  Timeline t;
  const int32_t b = t.add_span(Layer::kBinding, "matmul", 1000, 5000, -1, 1);
  const int32_t d = t.add_span(Layer::kDispatch, "CUDA", 1100, 4900, b, 1);
  t.add_span(Layer::kLibrary, "cublas \"gemm\"\n", 1200, 4800, d, 1);  // a name that needs escaping
  t.add_span(Layer::kBinding, "matmul", 6000, 6000, -1, 2);            // zero-length span
  t.device.enabled = true;
  ApiCallRecord launch;
  launch.name = "cuLaunchKernelEx";
  launch.domain = ApiDomain::kDriver;
  launch.start_ns = 2000;
  launch.end_ns = 2500;
  launch.correlation_id = 5;
  launch.is_launch = true;
  t.device.api_calls.push_back(launch);
  KernelRecord k;
  k.name = "sm90_gemm";
  k.start_ns = 3000;
  k.end_ns = 9000;
  k.correlation_id = 5;
  k.stream_id = 0;  // stream 0 must not become tid 0
  k.queued_ns = 2200;  // latency timestamps: inside the launch call, then handed to the GPU
  k.submitted_ns = 2750;
  t.device.kernels.push_back(k);
  KernelRecord k2 = k;
  k2.queued_ns = -1;  // not collected
  k2.submitted_ns = -1;
  k2.start_ns = 9000;  // back to back with the first on the same stream
  k2.end_ns = 9500;
  t.device.kernels.push_back(k2);
  MemoryRecord m;
  m.kind = "HtoD";
  m.bytes = 4096;
  m.start_ns = 500;  // earlier than any span: the base time must account for it
  m.end_ns = 900;
  m.stream_id = 3;
  t.device.memory.push_back(m);
  t.device.external.push_back({5, 1});
  return t;
}

}  // namespace

TEST_CASE("what HTA needs: the rank as Kineto writes it, a cpu_op per op, Kineto's memcpy names, GPU extents") {
  REQUIRE(test::steady_clock_in_use());
  Timeline t = device_timeline();
  MemoryRecord copy;  // op 1's copy, after its kernels on their stream (tid 1)
  copy.kind = "DtoH";
  copy.bytes = 1024;
  copy.start_ns = 9600;
  copy.end_ns = 9800;
  copy.correlation_id = 6;
  t.device.memory.push_back(copy);
  t.device.external.push_back({6, 1});
  ChromeTraceWriter w;
  TraceMetadata meta;
  meta.unix_minus_host_ns = 0;
  w.set_trace_metadata(meta);
  w.add_timeline(t, "eager");
  const std::string text = w.str();
  const auto errors = check_chrome_trace(text);
  INFO(joined(errors));
  CHECK(errors.empty());
  // HTA reads the rank with the pattern "rank":\s+(\d+) over the raw text, before parsing.
  CHECK(text.find("\"rank\": 0") != std::string::npos);

  const auto doc = nlohmann::json::parse(text);
  std::map<std::string, int> cpu_ops;
  std::vector<nlohmann::json> annotations;
  std::map<std::string, std::string> memory_names;  // cat -> name
  for (const auto& e : doc["traceEvents"]) {
    const std::string cat = e.value("cat", "");
    if (cat == "cpu_op") {
      ++cpu_ops[e["name"]];
      CHECK(e["args"]["External id"] == e["args"]["op"]);
    }
    if (cat == "gpu_user_annotation") annotations.push_back(e);
    if (cat == "gpu_memcpy" || cat == "gpu_memset") memory_names[e["name"]] = cat;
  }
  // One per binding span, around it (two matmul calls), named aten:: + the op.
  CHECK(cpu_ops == std::map<std::string, int>{{"aten::matmul", 2}});
  CHECK(memory_names.count("Memcpy HtoD") == 1);
  CHECK(memory_names.count("Memcpy DtoH") == 1);
  // Op 1's GPU work on stream tid 1: its two kernels [3000, 9500] and its copy [9600, 9800] (the op-less
  // HtoD copy before them is no op's). Op 2 put nothing on the GPU: no extent.
  REQUIRE(annotations.size() == 1);
  CHECK(annotations[0]["name"] == "matmul");
  CHECK(annotations[0]["tid"] == 1);
  CHECK(annotations[0]["args"]["op"] == 1);
  CHECK(annotations[0]["ts"].get<double>() == doctest::Approx(2.5));  // 3000 ns after the base at 500
  CHECK(annotations[0]["dur"].get<double>() == doctest::Approx(6.8));
}

TEST_CASE("the writer's output passes the validator: host spans, API calls, kernels, memcpy, flows") {
  REQUIRE(test::steady_clock_in_use());
  Timeline t = device_timeline();
  ChromeTraceWriter w;
  w.add_metadata("device", "NVIDIA \"test\" GPU");
  TraceMetadata meta;
  meta.unix_minus_host_ns = 1'000'000;
  w.set_trace_metadata(meta);
  w.add_timeline(t, "eager");
  const std::string text = w.str();
  const auto errors = check_chrome_trace(text);
  INFO(joined(errors));
  CHECK(errors.empty());

  const auto doc = nlohmann::json::parse(text);
  CHECK(doc["displayTimeUnit"] == "ns");
  // The base on the Unix epoch (Kineto's), and on strata's own clock.
  CHECK(doc["baseTimeNanoseconds"] == 1'000'500);
  CHECK(doc["strata"]["base time (CLOCK_MONOTONIC ns)"] == "500");
  CHECK(doc["strata"]["device"] == "NVIDIA \"test\" GPU");
  int spans = 0, kernels = 0, flows_s = 0, flows_f = 0, api = 0, memcpy = 0;
  for (const auto& e : doc["traceEvents"]) {
    CHECK(e["tid"] != 0);
    if (e["ph"] == "X" && e["cat"] == "kernel") {
      ++kernels;
      CHECK(e["tid"] == 1);
      CHECK(e["args"]["op"] == 1);
      if (e["ts"] == 2.5) {  // the first kernel, with latency timestamps
        CHECK(e["args"]["queued before start (us)"] == 0.8);
        CHECK(e["args"]["submitted before start (us)"] == 0.25);
      } else {
        CHECK_FALSE(e["args"].contains("queued before start (us)"));
      }
    }
    if (e["ph"] == "X" && (e["cat"] == "binding" || e["cat"] == "dispatch" || e["cat"] == "library")) ++spans;
    if (e["ph"] == "X" && e["cat"] == "cuda_driver") ++api;
    if (e["ph"] == "X" && e["cat"] == "gpu_memcpy") ++memcpy;
    if (e["ph"] == "s") ++flows_s;
    if (e["ph"] == "f") {
      ++flows_f;
      CHECK(e["bp"] == "e");
      CHECK(e["cat"] == "ac2g");
    }
  }
  CHECK(spans == 4);
  CHECK(kernels == 2);
  CHECK(api == 1);
  CHECK(memcpy == 1);
  // One arrow per launch call, to its first kernel.
  CHECK(flows_s == 1);
  CHECK(flows_f == 1);
  // Timestamps relative to the base, in microseconds with exactly three decimals.
  CHECK(text.find("\"ts\":0.500,\"dur\":4.000") != std::string::npos);  // the binding span 1000..5000
  CHECK(text.find("cublas \\\"gemm\\\"\\n") != std::string::npos);
}

// Note [Kineto trace layout], field by field, on hand-built GPU records: what HTA joins on.
TEST_CASE("the Kineto fields HTA reads: header, ProfilerStep, kernel / API / memcpy args, ac2g flows") {
  REQUIRE(test::steady_clock_in_use());
  Timeline t = device_timeline();
  t.device.api_calls[0].cbid = 652;  // a driver launch cbid
  t.device.kernels[0].device_id = t.device.kernels[1].device_id = 0;
  t.device.kernels[0].context_id = 1;
  t.device.kernels[0].grid[0] = 264, t.device.kernels[0].grid[1] = 2, t.device.kernels[0].grid[2] = 1;
  t.device.kernels[0].block[0] = 128, t.device.kernels[0].block[1] = 1, t.device.kernels[0].block[2] = 1;
  t.device.kernels[0].registers_per_thread = 168;
  t.device.kernels[0].static_shared_bytes = 1024;
  t.device.kernels[0].dynamic_shared_bytes = 4096;
  t.device.memory[0].correlation_id = 7;
  ChromeTraceWriter w;
  TraceMetadata meta;
  meta.gpus.push_back({0, "NVIDIA H100 80GB HBM3", 132, 9, 0, 85'029'158'912ull});
  meta.steps = {{1}, {2}};
  meta.unix_minus_host_ns = 0;
  w.set_trace_metadata(meta);
  w.add_timeline(t, "eager");
  const std::string text = w.str();
  const auto errors = check_chrome_trace(text);
  INFO(joined(errors));
  CHECK(errors.empty());
  const auto doc = nlohmann::json::parse(text);

  CHECK(doc["schemaVersion"] == 1);
  CHECK(doc["distributedInfo"]["rank"] == 0);
  CHECK(doc["distributedInfo"]["world_size"] == 1);
  REQUIRE(doc["deviceProperties"].size() == 1);
  const auto& gpu = doc["deviceProperties"][0];
  CHECK(gpu["id"] == 0);
  CHECK(gpu["name"] == "NVIDIA H100 80GB HBM3");
  CHECK(gpu["numSms"] == 132);
  CHECK(gpu["totalGlobalMem"] == 85'029'158'912ull);
  CHECK(gpu["computeMajor"] == 9);
  CHECK(gpu["computeMinor"] == 0);
  // The header comes before the events: HTA's streaming reader stops at traceEvents.
  CHECK(text.find("\"distributedInfo\"") < text.find("\"traceEvents\""));
  CHECK(text.find("\"deviceProperties\"") < text.find("\"traceEvents\""));

  std::map<std::string, nlohmann::json> steps;
  nlohmann::json kernel, launch, memcpy;
  for (const auto& e : doc["traceEvents"]) {
    const std::string name = e.value("name", "");
    if (name.starts_with("ProfilerStep#")) steps[name] = e;
    if (e.value("cat", "") == "kernel" && e["ts"] == 2.5) kernel = e;
    if (e.value("cat", "") == "cuda_driver") launch = e;
    if (e.value("cat", "") == "gpu_memcpy") memcpy = e;
    if (e["ph"] == "s" || e["ph"] == "f") {
      CHECK(e["name"] == "ac2g");
      CHECK(e["cat"] == "ac2g");
      CHECK(e["id"] == 5);  // the correlation id, as Kineto numbers its ac2g flows
    }
  }
  // Op 1: the binding span 1000..5000 and its launch call 2000..2500; op 2: the zero-length call at 6000.
  REQUIRE(steps.size() == 2);
  CHECK(steps["ProfilerStep#1"]["ph"] == "X");
  CHECK(steps["ProfilerStep#1"]["cat"] == "user_annotation");
  CHECK(steps["ProfilerStep#1"]["ts"] == 0.5);
  CHECK(steps["ProfilerStep#1"]["dur"] == 4.0);
  CHECK(steps["ProfilerStep#1"]["tid"] == launch["tid"]);  // on the host thread
  CHECK(steps["ProfilerStep#2"]["ts"] == 5.5);

  const auto& k = kernel["args"];
  CHECK(k["correlation"] == 5);
  CHECK(k["External id"] == 1);
  CHECK(k["stream"] == 1);  // stream 0 becomes 1, as its tid: HTA takes stream > 0 for the GPU
  CHECK(k["stream"] == kernel["tid"]);
  CHECK(k["device"] == 0);
  CHECK(k["context"] == 1);
  CHECK(k["grid"] == nlohmann::json::array({264, 2, 1}));
  CHECK(k["block"] == nlohmann::json::array({128, 1, 1}));
  CHECK(k["registers per thread"] == 168);
  CHECK(k["shared memory"] == 5120);
  CHECK(k["blocks per SM"] == 4);  // 528 blocks on 132 SMs
  CHECK(k["warps per SM"] == 16);  // 4 warps each
  CHECK(k["queued"] == 1.7);       // 2200 ns on the trace's axis (base 500)
  CHECK(k["submitted"] == 2.25);

  const auto& a = launch["args"];
  CHECK(a["correlation"] == 5);
  CHECK(a["cbid"] == 652);
  CHECK(a["External id"] == 1);
  CHECK_FALSE(a.contains("stream"));

  const auto& m = memcpy["args"];
  CHECK(m["correlation"] == 7);
  CHECK(m["stream"] == 3);
  CHECK(m["device"] == 0);
  CHECK(m["bytes"] == 4096);
  CHECK(m["memory bandwidth (GB/s)"] == doctest::Approx(10.24));  // 4096 bytes in 400 ns
}

TEST_CASE("a ProfilerStep that would cross another host event is left out and counted, not written") {
  Timeline t;
  t.add_span(Layer::kBinding, "matmul", 1000, 2000, -1, 1);
  // An op-less span that begins between op 1's spans and holds the second one: the step's hull
  // [1000, 4000] would cross it.
  const int32_t outer = t.add_span(Layer::kRuntime, "synchronize", 2500, 5000, -1, 0);
  t.add_span(Layer::kLibrary, "tail", 3000, 4000, outer, 1);
  ChromeTraceWriter w;
  TraceMetadata meta;
  meta.steps = {{1}};
  w.set_trace_metadata(meta);
  w.add_timeline(t, "eager");
  const std::string text = w.str();
  const auto errors = check_chrome_trace(text);
  INFO(joined(errors));
  CHECK(errors.empty());
  CHECK(text.find("ProfilerStep#1") == std::string::npos);
  CHECK(nlohmann::json::parse(text)["strata"]["ProfilerStep spans left out (would cross other events)"] == "1");
}

TEST_CASE("a CPU run writes no deviceProperties, and compare's steps fall in their own process group") {
  Timeline t;
  for (uint32_t op = 1; op <= 4; ++op) t.add_span(Layer::kBinding, "relu", op * 1000, op * 1000 + 500, -1, op);
  ChromeTraceWriter w;
  TraceMetadata meta;
  meta.steps = {{1, 2}, {3}, {4}};  // an eager round of two calls, then two replay rounds
  w.set_trace_metadata(meta);
  w.add_timeline(t, "eager", 0, 0, 2900);
  w.add_timeline(t, "plan replay", 1, 2900, 10000);
  const std::string text = w.str();
  const auto errors = check_chrome_trace(text);
  INFO(joined(errors));
  CHECK(errors.empty());
  const auto doc = nlohmann::json::parse(text);
  CHECK_FALSE(doc.contains("deviceProperties"));
  std::map<std::string, std::pair<int, double>> steps;  // name -> pid, dur
  for (const auto& e : doc["traceEvents"])
    if (e.value("name", "").starts_with("ProfilerStep#")) steps[e["name"]] = {e["pid"], e["dur"]};
  REQUIRE(steps.size() == 3);
  CHECK(steps["ProfilerStep#1"] == std::make_pair(1, 1.5));  // 1000 .. 2500: both calls of the round
  CHECK(steps["ProfilerStep#3"].first == 101);
  CHECK(steps["ProfilerStep#4"].first == 101);
}

TEST_CASE("the validator holds a trace to what HTA relies on") {
  const std::string x = R"({"ph":"X","name":"a","ts":1.0,"dur":10.0,"pid":1,"tid":2})";
  auto with_header = [&](const std::string& header) { return "{" + header + ",\"traceEvents\":[" + x + "]}"; };
  CHECK(check_chrome_trace(with_header(R"("distributedInfo":{"rank":0},"deviceProperties":[{"id":0,"numSms":132}])"))
            .empty());
  CHECK(rejects(with_header(R"("distributedInfo":{"world_size":1})"), "integer rank >= 0"));
  CHECK(rejects(with_header(R"("distributedInfo":{"rank":-1})"), "integer rank >= 0"));
  CHECK(rejects(with_header(R"("distributedInfo":{"rank":"0"})"), "integer rank >= 0"));
  CHECK(rejects(with_header(R"("distributedInfo":3)"), "integer rank >= 0"));
  CHECK(rejects(with_header(R"("deviceProperties":[])"), "non-empty array of flat objects"));
  CHECK(rejects(with_header(R"("deviceProperties":[{"id":0,"clocks":[1,2]}])"), "flat objects"));
  CHECK(rejects(with_header(R"("deviceProperties":{"id":0})"), "flat objects"));

  // ProfilerStep#N: complete, numbered, once, and not overlapping another step on its track.
  const std::string step1 = R"({"ph":"X","name":"ProfilerStep#1","ts":0.5,"dur":11.0,"pid":1,"tid":2})";
  CHECK(check_chrome_trace(trace(x + "," + step1)).empty());
  CHECK(rejects(trace(x + R"(,{"ph":"i","name":"ProfilerStep#1","ts":1.0,"pid":1,"tid":2,"s":"t"})"),
                "must be a complete (X) event"));
  CHECK(rejects(trace(x + R"(,{"ph":"X","name":"ProfilerStep#one","ts":0.5,"dur":11.0,"pid":1,"tid":2})"),
                "is not ProfilerStep#N"));
  CHECK(rejects(trace(x + "," + step1 + R"(,{"ph":"X","name":"ProfilerStep#1","ts":20,"dur":1,"pid":1,"tid":2})"),
                "ProfilerStep#1 appears more than once"));
  // Nested steps are valid X nesting, but a host event inside both would belong to two steps.
  CHECK(rejects(trace(x + "," + step1 + R"(,{"ph":"X","name":"ProfilerStep#2","ts":1,"dur":2,"pid":1,"tid":2})"),
                "ProfilerStep#1 and ProfilerStep#2 overlap"));

  // GPU events need correlation and stream > 0; API calls need correlation and cbid, and no stream.
  auto event = [&](const std::string& cat, const std::string& args) {
    return trace(R"({"ph":"X","name":"k","cat":")" + cat + R"(","ts":1,"dur":1,"pid":10,"tid":7,"args":{)" + args + "}}");
  };
  CHECK(check_chrome_trace(event("kernel", R"("correlation":5,"stream":7)")).empty());
  CHECK(check_chrome_trace(event("cuda_runtime", R"("correlation":5,"cbid":211)")).empty());
  CHECK(rejects(event("kernel", R"("stream":7)"), "kernel event without an integer args.correlation"));
  CHECK(rejects(event("kernel", R"("correlation":5,"stream":0)"), "args.stream > 0"));
  CHECK(rejects(event("gpu_memcpy", R"("correlation":5)"), "gpu_memcpy event without an integer args.stream > 0"));
  CHECK(rejects(event("gpu_memset", R"("correlation":5,"stream":"7")"), "args.stream > 0"));
  CHECK(rejects(event("cuda_driver", R"("correlation":5)"), "without an integer args.cbid"));
  CHECK(rejects(event("cuda_runtime", R"("correlation":5,"cbid":211,"stream":7)"), "would take it for a GPU event"));
  CHECK(rejects(trace(R"({"ph":"X","name":"k","cat":"kernel","ts":1,"dur":1,"pid":10,"tid":7})"),
                "args.correlation"));
  CHECK(rejects(trace(R"({"ph":"X","name":"k","cat":"kernel","ts":1,"dur":1,"pid":10,"tid":7,"args":[]})"),
                "args.correlation"));
}

TEST_CASE("an empty timeline, and two timelines in one file, are valid traces") {
  REQUIRE(test::steady_clock_in_use());
  Timeline empty;
  ChromeTraceWriter w0;
  w0.add_timeline(empty, "eager");
  CHECK(check_chrome_trace(w0.str()).empty());

  Timeline a = device_timeline(), b = device_timeline();
  ChromeTraceWriter w;
  w.add_timeline(a, "eager", 0);
  w.add_timeline(b, "graph replay", 1);
  const std::string text = w.str();
  const auto errors = check_chrome_trace(text);
  INFO(joined(errors));
  CHECK(errors.empty());  // flow ids and pids of the two groups do not collide
}

TEST_CASE("a real traced call writes a valid trace") {
  Timeline t;
  {
    tracing::ActiveScope scope(&t);
    for (uint32_t op = 1; op <= 3; ++op) {
      t.set_op(op);
      STRATA_ZONE(b, Layer::kBinding, "relu");
      STRATA_ZONE(d, Layer::kDispatch, "CPU");
      STRATA_ZONE(l, Layer::kLibrary, "relu (cpu loop)");
    }
  }
  ChromeTraceWriter w;
  w.add_timeline(t, "eager");
  const auto errors = check_chrome_trace(w.str());
  INFO(joined(errors));
  CHECK(errors.empty());
}

TEST_CASE("the validator accepts a minimal correct trace") {
  const std::string ok =
      trace(R"({"ph":"X","name":"a","ts":1.0,"dur":10.0,"pid":1,"tid":2},)"
            R"({"ph":"X","name":"b","ts":2.0,"dur":3.0,"pid":1,"tid":2},)"
            R"({"ph":"X","name":"k","ts":5.0,"dur":1.0,"pid":10,"tid":7},)"
            R"({"ph":"s","id":1,"ts":2.5,"pid":1,"tid":2},)"
            R"({"ph":"f","id":1,"ts":5.0,"pid":10,"tid":7,"bp":"e"},)"
            R"({"ph":"M","name":"thread_name","ts":0,"pid":1,"tid":2,"args":{"name":"main"}})");
  CHECK(check_chrome_trace(ok).empty());
}

TEST_CASE("the validator rejects each violation of the invariants") {
  const std::string x = R"({"ph":"X","name":"a","ts":1.0,"dur":10.0,"pid":1,"tid":2})";
  CHECK(rejects("{\"traceEvents\":[", "not valid JSON"));
  CHECK(rejects(trace(R"({"ph":"X","ts":NaN,"dur":1,"pid":1,"tid":2})"), "not valid JSON"));
  CHECK(rejects(trace(R"({"ph":"X","ts":Infinity,"dur":1,"pid":1,"tid":2})"), "not valid JSON"));
  CHECK(rejects("[]", "top level must be an object with a traceEvents array"));
  CHECK(rejects("{\"traceEvents\":{}}", "traceEvents array"));
  CHECK(rejects(trace(R"({"ph":"X","ts":-1.0,"dur":1,"pid":1,"tid":2})"), "negative"));
  CHECK(rejects(trace(R"({"ph":"X","ts":1.0,"dur":1,"pid":1,"tid":0})"), "tid is 0"));
  CHECK(rejects(trace(R"({"ph":"X","ts":1.0,"pid":1,"tid":2})"), "X event without a non-negative dur"));
  CHECK(rejects(trace(R"({"ph":"X","ts":1.0,"dur":-2,"pid":1,"tid":2})"), "non-negative dur"));
  CHECK(rejects(trace(R"({"ph":"X","dur":1,"pid":1,"tid":2})"), "missing numeric ts"));
  CHECK(rejects(trace(R"({"ph":"X","ts":1,"dur":1})"), "missing pid/tid"));
  CHECK(rejects(trace(R"(3)"), "not an object with 'ph'"));
  // Partial overlap on one track: [1, 11] and [5, 15].
  CHECK(rejects(trace(x + R"(,{"ph":"X","name":"b","ts":5.0,"dur":10.0,"pid":1,"tid":2})"),
                "X events overlap without nesting"));
  // The same two intervals on different tracks are fine.
  CHECK(
      check_chrome_trace(trace(x + R"(,{"ph":"X","name":"b","ts":5.0,"dur":10.0,"pid":1,"tid":3})")).empty());
  // A flow with two starts, and one without an end.
  CHECK(rejects(
      trace(x + R"(,{"ph":"s","id":4,"ts":2,"pid":1,"tid":2},{"ph":"s","id":4,"ts":3,"pid":1,"tid":2},)"
                R"({"ph":"f","id":4,"ts":4,"pid":1,"tid":2})"),
      "flow id 4 has 2 start(s) and 1 end(s)"));
  CHECK(rejects(trace(x + R"(,{"ph":"s","id":4,"ts":2,"pid":1,"tid":2})"),
                "flow id 4 has 1 start(s) and 0 end(s)"));
  // A flow endpoint outside every X on its track (ts 20 is after [1, 11]); and on a track with no X.
  CHECK(rejects(
      trace(x + R"(,{"ph":"s","id":4,"ts":2,"pid":1,"tid":2},{"ph":"f","id":4,"ts":20,"pid":1,"tid":2})"),
      "flow id 4 has an endpoint outside every X event on its track"));
  CHECK(rejects(
      trace(x + R"(,{"ph":"s","id":4,"ts":2,"pid":1,"tid":2},{"ph":"f","id":4,"ts":2,"pid":1,"tid":9})"),
      "endpoint outside every X event"));
  CHECK(rejects(trace(R"({"ph":"s","ts":2,"pid":1,"tid":2})"), "flow event without id"));
}

// Inputs that parsed, or half-parsed, and passed although they are no trace (each also a fuzz seed in
// fuzz/corpus/chrome_trace).
TEST_CASE("the validator refuses what is not a trace: NUL, duplicate keys, phases, B/E, tid, args, no events") {
  const std::string x = R"({"ph":"X","name":"a","ts":1.0,"dur":10.0,"pid":1,"tid":2})";
  CHECK(rejects(trace(x) + std::string("\0", 1) + "anything", "byte " + std::to_string(trace(x).size()) + " is a NUL"));
  CHECK(rejects(trace(R"({"ph":"X","ph":"B","name":"a","ts":1.0,"dur":10.0,"pid":1,"tid":2})"),
                "key 'ph' appears twice in one object"));
  CHECK(rejects(R"({"traceEvents":[],"traceEvents":[)" + x + "]}", "key 'traceEvents' appears twice"));
  CHECK(rejects(trace(R"({"ph":"Q","name":"a","ts":1.0,"pid":1,"tid":2})"), "event 0: unknown phase 'Q'"));
  CHECK(rejects(trace(R"({"ph":"B","name":"a","ts":1.0,"pid":1,"tid":2})"),
                "event 0: B event never closed by an E event on its track"));
  CHECK(rejects(trace(R"({"ph":"E","ts":1.0,"pid":1,"tid":2})"), "event 0: E event with no open B event"));
  // A B closed on another track is still open on its own.
  CHECK(rejects(trace(R"({"ph":"B","name":"a","ts":1.0,"pid":1,"tid":2},{"ph":"E","ts":2.0,"pid":1,"tid":3})"),
                "B event never closed"));
  CHECK(rejects(trace(R"({"ph":"X","name":"a","ts":1.0,"dur":1,"pid":1,"tid":-4})"), "event 0: tid -4 is negative"));
  CHECK(rejects(trace(R"({"ph":"X","name":"a","ts":1.0,"dur":1,"pid":-1,"tid":2})"), "event 0: pid -1 is negative"));
  CHECK(rejects(trace(R"({"ph":"X","name":"a","ts":1.0,"dur":1,"pid":1,"tid":2,"args":[1,2]})"),
                "event 0: args is array, not an object"));
  CHECK(rejects(R"({"traceEvents":[]})", "traceEvents is empty"));
  // Ids past int64 were read wrapped ("tid -1 is negative" for 2^64 - 1); now named as typed, once.
  const std::vector<std::string> big = check_chrome_trace(
      trace(R"({"ph":"X","name":"a","ts":1.0,"dur":1,"pid":1,"tid":18446744073709551615})"));
  REQUIRE(big.size() == 1);
  CHECK(big[0] == "event 0: tid 18446744073709551615 is out of range (at most 2^63 - 1)");
  CHECK(rejects(trace(R"({"ph":"X","name":"a","ts":1.0,"dur":1,"pid":9223372036854775808,"tid":2})"),
                "event 0: pid 9223372036854775808 is out of range"));
  CHECK(
      check_chrome_trace(trace(R"({"ph":"X","name":"a","ts":1.0,"dur":1,"pid":1,"tid":9223372036854775807})"))
          .empty());
  // An E earlier than its B: a negative duration.
  CHECK(
      rejects(trace(R"({"ph":"B","name":"a","ts":5.0,"pid":1,"tid":2},{"ph":"E","ts":1.0,"pid":1,"tid":2})"),
              "event 1: E event at ts 1 us ends before its B (event 0) began at ts 5 us"));
  // Matched B/E pairs, nested, are a valid trace (an E at its B's ts too: a zero duration).
  CHECK(check_chrome_trace(
            trace(R"({"ph":"B","name":"a","ts":1.0,"pid":1,"tid":2},{"ph":"E","ts":1.0,"pid":1,"tid":2})"))
            .empty());
  CHECK(check_chrome_trace(trace(R"({"ph":"B","name":"a","ts":1.0,"pid":1,"tid":2},)"
                                 R"({"ph":"B","name":"b","ts":2.0,"pid":1,"tid":2},)"
                                 R"({"ph":"E","ts":3.0,"pid":1,"tid":2},{"ph":"E","ts":4.0,"pid":1,"tid":2})"))
            .empty());
}

TEST_CASE("the validator reports wrongly typed fields instead of throwing") {
  CHECK(rejects(trace(R"({"ph":"X","ts":1,"dur":1,"pid":1,"tid":"main"})"), "pid/tid"));
  CHECK(rejects(trace(R"({"ph":"X","ts":1,"dur":1,"pid":"p","tid":2})"), "pid/tid"));
  CHECK(rejects(trace(R"({"ph":7,"ts":1,"dur":1,"pid":1,"tid":2})"), "'ph'"));
  CHECK(rejects(trace(R"({"ph":"X","ts":"1","dur":1,"pid":1,"tid":2})"), "missing numeric ts"));
  CHECK(rejects(
      trace(R"({"ph":"X","ts":1,"dur":1,"pid":1,"tid":2},{"ph":"s","id":"0x1","ts":1,"pid":1,"tid":2})"),
      "flow event without id"));
  CHECK(rejects(trace(R"({"ph":"X","ts":1,"dur":1,"pid":1.5,"tid":2})"), "pid/tid"));
  // Times so large that nanoseconds overflow 64 bits are refused, not wrapped.
  CHECK(rejects(trace(R"({"ph":"X","ts":1e300,"dur":1,"pid":1,"tid":2})"), "out of range"));
  CHECK(rejects(trace(R"({"ph":"X","ts":1,"dur":1e300,"pid":1,"tid":2})"), "out of range"));
}

TEST_CASE("json_escape") {
  CHECK(json_escape("plain") == "plain");
  CHECK(json_escape("a\"b\\c\nd\te\r") == "a\\\"b\\\\c\\nd\\te\\r");
  CHECK(json_escape(std::string("\x01", 1)) == "\\u0001");
  CHECK(nlohmann::json::parse("\"" + json_escape("x\x1f\"y\\") + "\"") == "x\x1f\"y\\");
}

TEST_CASE("json_escape keeps well-formed UTF-8 and replaces each byte that is not, counting them") {
  size_t replaced = 0;
  // Two-, three- and four-byte sequences (é, €, 😀) pass through as they are.
  CHECK(json_escape("\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80", replaced) == "\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80");
  CHECK(replaced == 0);
  // A lone continuation byte, a truncated sequence at the end, an overlong '/', a UTF-16 surrogate and a
  // code point past U+10FFFF: each byte that starts no well-formed sequence becomes U+FFFD.
  const std::string fffd = "\xEF\xBF\xBD";
  CHECK(json_escape("a\x80z", replaced) == "a" + fffd + "z");
  CHECK(replaced == 1);
  CHECK(json_escape("\xE2\x82", replaced) == fffd + fffd);
  CHECK(json_escape("\xC0\xAF", replaced) == fffd + fffd);
  CHECK(json_escape("\xED\xA0\x80", replaced) == fffd + fffd + fffd);
  CHECK(json_escape("\xF4\x90\x80\x80", replaced) == fffd + fffd + fffd + fffd);
  CHECK(replaced == 12);
  for (const char* text : {"a\x80z", "\xE2\x82", "\xC0\xAF", "\xED\xA0\x80", "\xF4\x90\x80\x80"})
    CHECK_NOTHROW((void)nlohmann::json::parse("\"" + json_escape(text) + "\"").dump());
}

TEST_CASE("a span named with bytes that are not UTF-8: the trace still parses, and its header says so") {
  // A name read through a dangling pointer once held such bytes (Note [JSON text is valid UTF-8]).
  Timeline t;
  const char bad_name[] = "gemm \xFF\xFE (cpu)";
  t.add_span(Layer::kLibrary, bad_name, 1000, 2000, -1, 1);
  ChromeTraceWriter writer;
  writer.add_timeline(t, "cli");
  const std::string text = writer.str();
  const nlohmann::json doc = nlohmann::json::parse(text);  // throws if the trace is not valid UTF-8 JSON
  CHECK(doc["strata"][kInvalidUtf8Key] == "2 bytes");
  CHECK(json_text_replaced_bytes(text));
  bool found = false;
  for (const nlohmann::json& event : doc["traceEvents"])
    found = found || event.value("name", "") == "gemm \xEF\xBF\xBD\xEF\xBF\xBD (cpu)";
  CHECK(found);
  // A trace with clean names carries no mark.
  Timeline clean;
  clean.add_span(Layer::kLibrary, "gemm (cpu)", 1000, 2000, -1, 1);
  ChromeTraceWriter clean_writer;
  clean_writer.add_timeline(clean, "cli");
  CHECK_FALSE(json_text_replaced_bytes(clean_writer.str()));
}
