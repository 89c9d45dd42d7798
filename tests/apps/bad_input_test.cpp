// End-to-end: the catalogue of bad input. Each case checks the exit code, one clear message on stderr
// (no stack trace, no "terminate called"), no partial table on stdout, and no file left behind.
#include <doctest/doctest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include "tests/apps/e2e.h"

using namespace strata::test;

TEST_CASE("every malformed size is refused with exit 2 and the reason") {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"", "missing size"},
      {"1024x", "empty field at the end"},
      {"x1024", "empty field at the start"},
      {"0", "contains 0"},
      {"-5", "is negative"},
      {"1e3", "is not a whole number"},
      {"99999999999999999999", "is too large"},
      {"2147483648", "at most 2147483647"},
      {"1x2x3x4x5", "more than 4 fields"},
      {"1x1", "matmul takes N (square) or MxKxN"},
      {"1x2x3x4", "matmul takes N (square) or MxKxN"},
      {"12ab", "has the character 'a'"},
      {"10 24", "has the character ' '"},
      {"+5", "has a sign"},
  };
  for (const auto& c : cases) {
    const auto& spec = c.first;
    const auto& message = c.second;
    CAPTURE(spec);
    check_refused(run_strata(cpu({"trace", "matmul", spec})), 2, message);
  }
  check_refused(run_strata(cpu({"trace", "linear", "32x64"})), 2, "linear takes BxINxOUT");
  check_refused(run_strata(cpu({"trace", "conv", "1x3x8"})), 2, "conv takes NxCxHxW");
  check_refused(run_strata(cpu({"trace", "relu", "1x2x3x4x5"})), 2, "more than 4 fields");
}

TEST_CASE("a size too large for memory is refused before allocating, with the bytes it would need") {
  // 3 x 10^14 floats: the message must come from the size check, not from the allocator or the OOM killer.
  check_refused(run_strata(cpu({"trace", "matmul", "10000000"})), 2,
                "matmul 10000000 (f32) needs 1.07 PiB on cpu but only");
  check_refused(run_strata(cpu({"trace", "matmul", "2147483647", "--dtype", "f64"})), 2,
                "more than 2^63 bytes");
  check_refused(run_strata(cpu({"trace", "add", "65536x65536x65536x65536"})), 2, "more than 2^63");
  // Sizes whose byte count overflows even 128-bit products (see tests/frontend/prepare_test.cpp).
  check_refused(run_strata(cpu({"trace", "conv", "1073741825x2x2x2", "--out-channels", "2147483646",
                                "--kernel", "1", "--pad", "2147483647", "--dtype", "f64"})),
                2, "more than 2^63 bytes");
}

TEST_CASE("conv options that do not fit the input are refused") {
  check_refused(run_strata(cpu({"trace", "conv", "1x3x4x4", "--kernel", "5"})), 2,
                "--kernel 5 is larger than the padded input 4x4");
  check_refused(run_strata(cpu({"trace", "conv", "1x3x4x4", "--stride", "0"})), 2,
                "--stride must be between 1 and 2147483647, got 0");
  check_refused(run_strata(cpu({"trace", "conv", "1x3x4x4", "--pad", "-1"})), 2, "--pad must be between 0 and 2147483647, got -1");
  check_refused(run_strata(cpu({"trace", "conv", "1x3x4x4", "--out-channels", "0"})), 2,
                "--out-channels must be");
  check_refused(run_strata(cpu({"trace", "conv", "1x3x4x4", "--kernel", "0"})), 2,
                "--kernel must be between 1 and 2147483647");
  check_refused(run_strata(cpu({"trace", "conv", "1x3x4x4", "--dilation", "0"})), 2,
                "--dilation must be between 1 and 2147483647, got 0");
  check_refused(run_strata(cpu({"trace", "conv", "1x3x4x4", "--dilation", "-2"})), 2,
                "--dilation must be between 1 and 2147483647, got -2");
  check_refused(run_strata(cpu({"trace", "conv", "1x3x4x4", "--dilation", "2"})), 2,
                "--kernel 3 at --dilation 2 is larger than the padded input 4x4 (use a smaller --kernel or --dilation, "
                "or more --pad)");
  check_refused(run_strata(cpu({"trace", "conv", "1x4x8x8", "--groups", "3"})), 2,
                "--groups 3 must divide the input channels 4 and --out-channels 4");
  check_refused(run_strata(cpu({"trace", "conv", "1x4x8x8", "--groups", "2", "--out-channels", "5"})), 2,
                "--groups 2 must divide the input channels 4 and --out-channels 5");
  check_refused(run_strata(cpu({"trace", "conv", "1x4x8x8", "--groups", "0"})), 2,
                "--groups must be between 1 and 2147483647, got 0");
}

TEST_CASE("conv's --dilation and --groups reach the kernel: a checked run, the weight [K, C/groups, R, R]") {
  const RunResult r = run_strata(cpu({"trace", "conv", "2x4x9x9", "--out-channels", "6", "--stride", "2", "--pad",
                                      "1", "--dilation", "2", "--groups", "2", "--check"}));
  check_no_crash(r);
  CHECK(r.exit_code == 0);
  CHECK(r.out.find("weight [6x2x3x3] stride 2 pad 1 dilation 2 groups 2 -> [2x6x4x4]") != std::string::npos);
  CHECK(r.out.find("PASS") != std::string::npos);
}

TEST_CASE("unknown ops, options and values are usage errors") {
  const RunResult unknown = run_strata(cpu({"trace", "frobnicate", "1024"}));
  check_refused(unknown, 2, "unknown operator 'frobnicate'; strata traces:");
  CHECK(contains(unknown.err, "matmul N | MxKxN"));  // it lists what is accepted
  // A typo of an op's name is answered with the nearest name, and the same list.
  const RunResult typo_op = run_strata(cpu({"trace", "sliu", "1024"}));
  check_refused(typo_op, 2, "unknown operator 'sliu': did you mean 'silu'?");
  CHECK(contains(typo_op.err, "silu N | shape"));

  // Option parsing errors come from CLI11: its message, exit 2, nothing on stdout.
  for (const std::vector<std::string>& args : {std::vector<std::string>{"trace", "matmul", "64", "--bogus"},
                                               {"trace", "matmul", "64", "--repeat", "abc"},
                                               {"trace", "matmul"},
                                               {"frobnicate"},
                                               {}}) {
    const RunResult r = run_strata(args);
    check_no_crash(r);
    INFO(r.err);
    CHECK(r.exit_code == 2);
    CHECK(r.out.empty());
    CHECK_FALSE(r.err.empty());
    CHECK(count_lines(r.err) <= 3);
  }
  CHECK(contains(run_strata({"trace", "matmul", "64", "--bogus"}).err, "--bogus"));
  // An unknown command is named, with the nearest one when it looks like a typo.
  check_refused(run_strata({"frobnicate"}), 2, "unknown command 'frobnicate'");
  const RunResult typo = run_strata({"trcae", "matmul", "64"});
  check_refused(typo, 2, "unknown command 'trcae'; did you mean 'trace'?");
  CHECK(contains(typo.err, "commands: trace, compare"));

  check_refused(run_strata({"trace", "matmul", "64", "--repeat", "0"}), 2,
                "--repeat must be between 1 and 1000000, got 0");
  check_refused(run_strata({"trace", "matmul", "64", "--repeat", "-3"}), 2, "--repeat must be between");
  check_refused(run_strata({"trace", "matmul", "64", "--repeat", "3", "--warmup", "-1"}), 2,
                "--warmup must be between");
  check_refused(run_strata({"trace", "matmul", "64", "--budget", "0"}), 2, "--budget must be more than 0");
  check_refused(run_strata(cpu({"trace", "matmul", "64", "--dtype", "f128"})), 2, "unknown dtype 'f128'");
}

TEST_CASE("TF32 on the CPU is refused: it needs a GPU (f16/bf16 run on the CPU, widened to f32)") {
  check_refused(run_strata(cpu({"trace", "matmul", "64", "--tf32"})), 2,
                "--tf32 selects TF32 tensor-core math and needs a CUDA device");
  check_refused(run_strata(cpu({"trace", "matmul", "64", "--tf32", "--dtype", "f64"})), 2,
                "--tf32 applies to --dtype f32 only");
  check_refused(run_strata(cpu({"trace", "matmul", "64", "--tf32", "--dtype", "bf16"})), 2,
                "--tf32 applies to --dtype f32 only");
}

TEST_CASE("--autocast: unknown dtypes, dtypes it cannot cast to or from, and --tf32 beside it are refused") {
  for (const auto& [command_name, spec_text] : std::vector<std::pair<std::string, std::string>>{
           {"trace", "64"}, {"compare", "64"}, {"sweep", "16:32"}}) {
    const std::string command = command_name, spec = spec_text;  // named copies: clang 14 cannot capture bindings
    CAPTURE(command);
    check_refused(run_strata(cpu({command, "matmul", spec, "--autocast", "fp8"})), 2,
                  "unknown --autocast dtype 'fp8'; allowed: bf16, f16");
    check_refused(run_strata(cpu({command, "matmul", spec, "--autocast", "f32"})), 2,
                  "--autocast f32: autocast casts to a low-precision dtype, bf16 or f16");
    check_refused(run_strata(cpu({command, "matmul", spec, "--autocast", "f64"})), 2,
                  "--autocast f64: autocast casts to a low-precision dtype");
    check_refused(run_strata(cpu({command, "matmul", spec, "--autocast", "bf16", "--dtype", "f64"})), 2,
                  "--autocast bf16 casts f32 inputs, but --dtype is f64 (autocast leaves f64 alone");
    check_refused(run_strata(cpu({command, "matmul", spec, "--autocast", "f16", "--dtype", "bf16"})), 2,
                  "--autocast f16 casts f32 inputs, but --dtype is bf16 (already low precision");
    check_refused(run_strata(cpu({command, "matmul", spec, "--autocast", "bf16", "--tf32"})), 2,
                  "--tf32 and --autocast bf16 both choose the GEMMs' math: give one");
  }
  check_refused(run_strata({"trace", "matmul", "64", "--device", "cpu", "--autocast"}), 2, "--autocast: 1 required");
}

TEST_CASE("--device: unknown names are usage errors, cuda without a usable GPU is exit 4") {
  check_refused(run_strata(fast({"trace", "matmul", "64", "--device", "foo"})), 2, "unknown device 'foo'");
  check_refused(run_strata(fast({"trace", "matmul", "64", "--device", "cuda:x"})), 2,
                "the index after 'cuda:'");
  // Without the NVIDIA driver's device nodes no GPU can be usable, whichever build this is.
  const bool driver_present = exists("/dev/nvidiactl") || exists("/dev/nvidia0");
  for (const char* device : {"cuda", "cuda:0"}) {
    CAPTURE(std::string(device));
    const RunResult r = run_strata(fast({"trace", "matmul", "64", "--device", device}));
    if (!STRATA_TEST_CUDA_BUILD || !driver_present) {
      check_refused(r, 4, "cuda");
    } else if (r.exit_code == 0) {
      MESSAGE("a GPU is usable here: exit 4 is checked on machines without one");
    } else {
      check_refused(r, 4, "cuda");
    }
  }
}

TEST_CASE("unwritable output paths are refused before the run, leaving nothing behind") {
  TempDir dir;
  const std::string missing = dir.file("no/such/dir/out.json");
  for (const char* option : {"--json", "--chrome-trace"}) {
    CAPTURE(std::string(option));
    check_refused(run_strata(cpu({"trace", "matmul", "64", option, dir.path()})), 2, "is a directory");
    check_refused(run_strata(cpu({"trace", "matmul", "64", option, dir.path() + "/"})), 2,
                  "names a directory");
    check_refused(run_strata(cpu({"trace", "matmul", "64", option, missing})), 2, "does not exist");
    // /proc accepts no new files, even from root.
    check_refused(run_strata(cpu({"trace", "matmul", "64", option, "/proc/strata-e2e.json"})), 2,
                  "cannot create a file in directory '/proc'");
    // An empty path is caught by the option parser (CLI11's message), not ignored as "no file".
    const RunResult empty = run_strata(cpu({"trace", "matmul", "64", option, ""}));
    check_no_crash(empty);
    CHECK(empty.exit_code == 2);
    CHECK(contains(empty.err, "output path is empty"));
    CHECK(empty.out.empty());
  }
  CHECK(dir.entries().empty());
  CHECK_FALSE(exists("/proc/strata-e2e.json"));
}

TEST_CASE("a directory without write permission is refused (needs a non-root user)") {
  if (is_root()) {
    MESSAGE(
        "skipped: root may write into a 0555 directory; the /proc case covers a refusal that holds for root");
    return;
  }
  TempDir dir;
  const std::string ro = dir.file("ro");
  REQUIRE(mkdir(ro.c_str(), 0555) == 0);
  check_refused(run_strata(cpu({"trace", "matmul", "64", "--json", ro + "/out.json"})), 2,
                "Permission denied");
}

TEST_CASE("--json and --chrome-trace naming the same file is refused, however it is spelled") {
  TempDir dir;
  const std::string path = dir.file("same.json");
  check_refused(run_strata(cpu({"trace", "matmul", "64", "--json", path, "--chrome-trace", path})), 2,
                "name the same file");
  RunOptions in_dir;
  in_dir.cwd = dir.path();
  check_refused(
      run_strata(cpu({"trace", "matmul", "64", "--json", "same.json", "--chrome-trace", "./same.json"}), in_dir),
      2, "name the same file");
  CHECK(dir.entries().empty());
}

TEST_CASE("a full disk while writing: exit 1, the reason, and no file or temporary left") {
  TempDir dir;
  // RLIMIT_FSIZE of 512 bytes: the report is several KiB, so the write fails part-way with EFBIG, the
  // way it would on a file system that fills up.
  RunOptions small;
  small.file_size_limit = 512;
  const RunResult r = run_strata(cpu({"trace", "matmul", "64", "--json", dir.file("out.json")}), small);
  check_no_crash(r);
  INFO(r.out << r.err);
  CHECK(r.exit_code == 1);
  CHECK(contains(r.err, "cannot write '" + dir.file("out.json") + "' (write): File too large"));
  CHECK(count_of(r.err, "strata: ") == 1);
  CHECK_FALSE(contains(r.out, "wrote "));
  CHECK(dir.entries().empty());
  // /dev/full: a device whose every write fails with ENOSPC.
  const RunResult full = run_strata(cpu({"trace", "matmul", "64", "--chrome-trace", "/dev/full"}));
  check_no_crash(full);
  CHECK(full.exit_code == 1);
  CHECK(contains(full.err, "No space left on device"));
  struct stat st {};
  REQUIRE(stat("/dev/full", &st) == 0);
  CHECK(S_ISCHR(st.st_mode));
}

TEST_CASE("one number rule for every integer option: decimal digits only, as for sizes") {
  // CLI11 alone reads 0x10 as 16 and 010 as 8, and lets ' 5' and '+5' through.
  const std::vector<std::vector<std::string>> options = {
      {"trace", "relu", "16", "--repeat"},   {"trace", "relu", "16", "--warmup"},
      {"trace", "relu", "16", "--seed"},     {"trace", "conv", "1x3x8x8", "--out-channels"},
      {"trace", "conv", "1x3x8x8", "--kernel"}, {"trace", "conv", "1x3x8x8", "--stride"},
      {"trace", "conv", "1x3x8x8", "--pad"}, {"compare", "relu", "16", "--ops-per-graph"}};
  for (const auto& option : options) {
    for (const char* value : {"0x10", " 5", "+5", "5 ", "1e3", "0b1", "1.0", "", "--"}) {
      CAPTURE(option.back());
      CAPTURE(std::string(value));
      std::vector<std::string> args = option;
      args.push_back(value);
      args.insert(args.end(), {"--device", "cpu"});
      const RunResult r = run_strata(args);
      if (std::string(value).empty() || std::string(value) == "--") {
        check_no_crash(r);  // CLI11: a missing value
        CHECK(r.exit_code == 2);
        CHECK(r.out.empty());
        continue;
      }
      check_refused(r, 2, option.back() + ": '" + value + "' is not a whole number written in decimal digits");
    }
  }
  // Leading zeros are decimal, as in sizes: 010 is ten, not eight.
  TempDir dir;
  const RunResult ten = run_strata({"trace", "relu", "16", "--device", "cpu", "--warmup", "0", "--repeat", "010",
                                    "--json", dir.file("out.json")});
  check_no_crash(ten);
  REQUIRE(ten.exit_code == 0);
  CHECK(nlohmann::json::parse(read_file(dir.file("out.json")))["repeat"] == 10);
}

// The options that take seconds follow the same rule: CLI11 alone reads them with strtod, so 0x10 was
// a hex float (16 s) although hex is refused everywhere else, and inf and nan passed its parser.
TEST_CASE("one number rule for the seconds options: decimal with fraction and exponent, nothing else") {
  const std::vector<std::vector<std::string>> options = {{"trace", "relu", "16", "--budget"},
                                                         {"compare", "relu", "16", "--budget"},
                                                         {"sweep", "relu", "16,32", "--budget"},
                                                         {"sweep", "relu", "16,32", "--sweep-budget"}};
  for (const auto& option : options) {
    for (const char* value : {"0x10", "0x1p4", " 5", "+5", "5 ", "inf", "nan", "1e", "1.5.2", "e3"}) {
      CAPTURE(option.front());
      CAPTURE(option.back());
      CAPTURE(std::string(value));
      std::vector<std::string> args = option;
      args.push_back(value);
      args.insert(args.end(), {"--device", "cpu"});
      check_refused(run_strata(args), 2, option.back() + ": '" + value + "' is not a decimal number");
    }
    std::vector<std::string> args = option;
    args.insert(args.end(), {"1e999", "--device", "cpu"});
    check_refused(run_strata(args), 2, option.back() + ": '1e999' is out of range");
  }
  // In range for a double, out of the option's range: quoted short, not as 309 digits.
  check_refused(run_strata({"sweep", "relu", "16,32", "--device", "cpu", "--sweep-budget", "1e308"}), 2,
                "--sweep-budget must be more than 0 and at most 86400 seconds, got 1e+308");
  check_refused(run_strata({"trace", "relu", "16", "--device", "cpu", "--budget", "1e308"}), 2,
                "--budget must be more than 0 and at most 3600 seconds, got 1e+308");
  // Beside an explicit --repeat they size nothing: refused rather than ignored.
  check_refused(run_strata({"trace", "relu", "16", "--device", "cpu", "--repeat", "5", "--budget", "2"}), 2,
                "with --repeat 5 it would be ignored");
  check_refused(run_strata({"compare", "relu", "16", "--device", "cpu", "--repeat", "5", "--budget", "2"}), 2,
                "with --repeat 5 it would be ignored");
  check_refused(run_strata({"sweep", "relu", "16,32", "--device", "cpu", "--repeat", "5", "--budget", "2"}), 2,
                "with --repeat 5 it would be ignored");
  check_refused(run_strata({"sweep", "relu", "16,32", "--device", "cpu", "--repeat", "5", "--sweep-budget", "2"}), 2,
                "--sweep-budget shares time among the sizes when --repeat is not given");
  // Fractions and exponents are what these options are for.
  TempDir dir;
  const RunResult r = run_strata({"trace", "relu", "16", "--device", "cpu", "--warmup", "0", "--budget", "2.5e-2",
                                  "--json", dir.file("out.json")});
  check_no_crash(r);
  CHECK(r.exit_code == 0);
}

TEST_CASE("a value past the option's type is quoted as typed, never clamped") {
  check_refused(run_strata(cpu({"trace", "conv", "1x3x8x8", "--kernel", "9999999999999999999"})), 2,
                "--kernel: '9999999999999999999' is out of range");
  check_refused(run_strata(cpu({"trace", "conv", "1x3x8x8", "--pad", "-99999999999999999999"})), 2,
                "--pad: '-99999999999999999999' is out of range (at least -9223372036854775808)");
  check_refused(run_strata({"trace", "relu", "16", "--repeat", "99999999999999999999"}), 2,
                "--repeat: '99999999999999999999' is out of range");
  // In the type's range but not the option's: the option's own message, with the value typed.
  check_refused(run_strata(cpu({"trace", "conv", "1x3x8x8", "--stride", "3000000000"})), 2,
                "--stride must be between 1 and 2147483647, got 3000000000");
  check_refused(run_strata(cpu({"trace", "conv", "1x3x8x8", "--kernel", "2147483648"})), 2,
                "--kernel must be between 1 and 2147483647, got 2147483648");
}

TEST_CASE("--seed: 0 to 2^64-1, refused outside with exit 2, and recorded in the JSON report") {
  check_refused(run_strata(cpu({"trace", "relu", "16", "--seed", "-1"})), 2,
                "--seed: '-1' is negative; allowed: 0 to 18446744073709551615");
  check_refused(run_strata(cpu({"trace", "relu", "16", "--seed", "99999999999999999999999"})), 2,
                "--seed: '99999999999999999999999' is out of range (at most 18446744073709551615)");
  check_refused(run_strata(cpu({"trace", "relu", "16", "--seed", "18446744073709551616"})), 2, "is out of range");
  TempDir dir;
  const RunResult top = run_strata(cpu({"trace", "relu", "16", "--seed", "18446744073709551615", "--json", dir.file("a.json")}));
  check_no_crash(top);
  REQUIRE(top.exit_code == 0);
  CHECK(nlohmann::json::parse(read_file(dir.file("a.json")))["seed"].get<uint64_t>() == 18446744073709551615uLL);
  REQUIRE(run_strata(cpu({"trace", "relu", "16", "--json", dir.file("b.json")})).exit_code == 0);
  CHECK(nlohmann::json::parse(read_file(dir.file("b.json")))["seed"].get<uint64_t>() == 42uLL);  // the default, recorded too
  REQUIRE(run_strata(cpu({"compare", "relu", "16", "--seed", "7", "--json", dir.file("c.json")})).exit_code == 0);
  CHECK(nlohmann::json::parse(read_file(dir.file("c.json")))["seed"].get<uint64_t>() == 7uLL);
}

TEST_CASE("conv options given to another op are refused, not ignored") {
  check_refused(run_strata(cpu({"trace", "relu", "16", "--kernel", "3"})), 2,
                "--kernel applies to conv only; relu takes no conv options");
  check_refused(run_strata(cpu({"trace", "matmul", "16", "--out-channels", "8", "--pad", "1"})), 2,
                "--out-channels, --pad apply to conv only; matmul takes no conv options");
  check_refused(run_strata(cpu({"compare", "add", "16", "--stride", "2"})), 2,
                "--stride applies to conv only; add takes no conv options");
  check_refused(run_strata(cpu({"trace", "relu", "16", "--dilation", "2", "--groups", "2"})), 2,
                "--dilation, --groups apply to conv only; relu takes no conv options");
  // The default values are no choice of the user's: other ops run without them.
  const RunResult r = run_strata(cpu({"trace", "conv", "1x3x8x8", "--kernel", "3", "--stride", "1", "--pad", "1"}));
  check_no_crash(r);
  CHECK(r.exit_code == 0);
}

TEST_CASE("--view: an unknown argument or kind, a transposed view of a 1-D input, a sequence's unknown tensor: exit 2 with the reason") {
  check_refused(run_strata(cpu({"trace", "matmul", "8", "--view", "bias=t"})), 2,
                "--view 'bias=t': expected NAME=KIND with NAME a tensor argument of matmul (self, other)");
  check_refused(run_strata(cpu({"trace", "matmul", "8", "--view", "other=flip"})), 2,
                "unknown view; allowed: t (a transposed view, 2-D arguments), sliceN with N from 2 to 64");
  check_refused(run_strata(cpu({"trace", "matmul", "8", "--view", "other=slice1"})), 2, "unknown view");
  check_refused(run_strata(cpu({"trace", "relu", "8", "--view", "self=t"})), 2,
                "'self' is [8]; a transposed view needs a 2-D argument");
  check_refused(run_strata(cpu({"compare", "matmul", "8", "--view", "other=flip"})), 2, "unknown view");
  // A sequence's tensors have names of their own (tests/apps/sequence_view_test.cpp has the rest).
  check_refused(run_strata(cpu({"trace", "mlp", "4x8x2", "--view", "self=t"})), 2,
                "expected NAME=KIND with NAME one of mlp 4x8x2's tensors: input, 0.weight, 0.bias");
}

TEST_CASE("an empty --emit, --arch, --autocast or --peer is refused with exit 2, not taken as absent") {
  // Each option's empty string meant "not given": --emit '' traced without the listing asked for.
  struct Case {
    std::vector<std::string> args;
    const char* message;
  };
  const Case cases[] = {
      {{"trace", "relu_matmul", "8", "--mode", "compiled", "--emit", ""}, "--emit: the value is empty; allowed: cpp, ptx, sass"},
      {{"trace", "relu", "8", "--emit="}, "--emit: "},  // CLI11's own refusal: "1 required TEXT missing"
      {{"trace", "relu_matmul", "8", "--mode", "compiled", "--emit", "ptx", "--arch", ""},
       "--arch: the value is empty; allowed: sm_80, sm_86"},
      {{"trace", "matmul", "8", "--autocast", ""}, "--autocast: the value is empty; allowed: bf16, f16"},
      {{"compare", "matmul", "8", "--autocast="}, "--autocast: "},
      {{"sweep", "matmul", "8,16", "--autocast", ""}, "--autocast: the value is empty"},
      {{"trace", "relu", "8", "--peer", ""}, "--peer: the value is empty; allowed: torch"},
      {{"compare", "relu", "8", "--peer", ""}, "--peer: the value is empty; allowed: torch"},
  };
  for (const Case& c : cases) {
    std::vector<std::string> args = c.args;
    args.insert(args.begin() + 1, {"--device", "cpu"});
    CAPTURE(args.back());
    check_refused(run_strata(args), 2, c.message);
  }
}

TEST_CASE("--view twice for one operand: exit 2 naming the operand, for trace and compare, any kinds") {
  // Only the last view applied before; one view per tensor, as a sequence's --view already says.
  for (const char* command : {"trace", "compare"}) {
    CAPTURE(std::string(command));
    check_refused(run_strata(cpu({command, "matmul", "8", "--view", "other=t", "--view", "other=slice2"})), 2,
                  "--view other is given twice (t and slice2); give one view per tensor");
    check_refused(run_strata(cpu({command, "add", "8x4", "--view", "self=slice3", "--view", "other=t", "--view",
                                  "self=slice3"})),
                  2, "--view self is given twice (slice3 and slice3)");
  }
  // Two different operands are two views, as before.
  CHECK(run_strata(cpu({"trace", "matmul", "8", "--view", "self=t", "--view", "other=slice2"})).exit_code == 0);
}

TEST_CASE("--algos / --algo / --time: bad values, other ops and the CPU are refused (exit 2), no GPU is exit 4") {
  for (const char* command : {"trace", "compare"}) {
    CAPTURE(std::string(command));
    check_refused(run_strata(cpu({command, "matmul", "64", "--algo", "1"})), 2,
                  "--algo chooses among cuBLASLt's kernels and needs a CUDA device; the CPU's GEMM is OpenBLAS's");
    check_refused(run_strata(cpu({command, "linear", "8x16x32", "--algos", "4", "--time"})), 2,
                  "--algos chooses among cuBLASLt's kernels and needs a CUDA device");
  }
  check_refused(run_strata(cpu({"trace", "matmul", "64", "--algos", "0"})), 2,
                "--algos 0: N is how many of cuBLASLt's candidates to list, 1 to 64");
  check_refused(run_strata(cpu({"trace", "matmul", "64", "--algos", "65"})), 2, "1 to 64");
  check_refused(run_strata(cpu({"trace", "matmul", "64", "--algo", "-1"})), 2,
                "--algo -1: K is a candidate's index in the heuristic's list, 0 to 63");
  check_refused(run_strata(cpu({"trace", "matmul", "64", "--time"})), 2,
                "--time measures each candidate --algos lists: add --algos N");
  check_refused(run_strata(cpu({"trace", "relu", "64", "--algos", "4"})), 2,
                "--algos chooses among cuBLASLt's kernels for matmul and linear; relu calls no cuBLASLt GEMM");
  check_refused(run_strata(cpu({"trace", "relu_matmul", "64", "--algo", "2"})), 2,
                "--algo chooses among cuBLASLt's kernels for matmul and linear; relu_matmul calls");
  // The request is valid; a machine without a usable GPU cannot satisfy it.
  const bool driver_present = exists("/dev/nvidiactl") || exists("/dev/nvidia0");
  const RunResult r = run_strata(fast({"trace", "matmul", "64", "--device", "cuda", "--algos", "8"}));
  if (!STRATA_TEST_CUDA_BUILD || !driver_present) {
    check_refused(r, 4, "cuda");
  } else {
    MESSAGE("a driver is present: the GPU run is checked by tests/apps/gemm_algo_gpu_test.cpp");
  }
}
