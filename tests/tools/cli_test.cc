// The rckpt command-line tool, run as a user runs it: exit codes, one-line
// errors on stderr, and the documented outputs.
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <regex>

#include "rckpt/io.h"
#include "test_runtime.h"
#include "test_util.h"

namespace rckpt {
namespace {

const std::string kCli = RCKPT_CLI_PATH;

// A rate in binary units (docs/CLI.md "Units") followed by `after`; how fast
// a small file goes varies, so the unit may be B, KiB, MiB or GiB.
bool HasBinaryRate(const std::string& out, const std::string& after) {
  static const std::regex kRate(R"([0-9]+(\.[0-9]+)? (B|KiB|MiB|GiB)/s)");
  for (auto it = std::sregex_iterator(out.begin(), out.end(), kRate);
       it != std::sregex_iterator(); ++it) {
    if (out.compare(it->position() + it->length(), after.size(), after) == 0) return true;
  }
  return false;
}
const std::string kGolden = std::string(RCKPT_TEST_DATA_DIR) + "/golden/";
const std::string kErrors = std::string(RCKPT_TEST_DATA_DIR) + "/golden-errors/";

struct CliRun {
  int code;
  std::string out;
  std::string err;
};

CliRun Cli(const std::string& args) {
  std::string dir = testing::NewTempDir("cli");
  std::string cmd = kCli + " " + StandinCommand(args) + " >" + dir + "/out 2>" + dir + "/err";
  int status = std::system(cmd.c_str());
  auto slurp = [](const std::string& p) {
    std::ifstream in(p);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  return CliRun{WIFEXITED(status) ? WEXITSTATUS(status) : -1, slurp(dir + "/out"), slurp(dir + "/err")};
}

int Lines(const std::string& s) { return static_cast<int>(std::count(s.begin(), s.end(), '\n')); }

TEST(CliTest, HelpTeachesEveryCommand) {
  CliRun r = Cli("--help");
  EXPECT_EQ(r.code, 0);
  for (const char* c : {"inspect", "verify", "plan", "load"}) {
    EXPECT_NE(r.out.find(c), std::string::npos) << c;
    CliRun h = Cli(std::string(c) + " --help");
    EXPECT_EQ(h.code, 0) << c;
    EXPECT_NE(h.out.find("usage: rckpt " + std::string(c)), std::string::npos) << c;
    EXPECT_NE(h.out.find("Exit codes"), std::string::npos) << c;
  }
}

TEST(CliTest, UnknownCommandAndUnknownFlagAreUsageErrors) {
  EXPECT_EQ(Cli("frobnicate").code, 2);
  CliRun r = Cli("inspect --frob " + kGolden + "v1.0-all-dtypes-raw.rckpt");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("unknown option '--frob'"), std::string::npos) << r.err;
}

TEST(CliTest, InspectShowsTensorsAndRngRecords) {
  CliRun r = Cli("inspect " + kGolden + "v1.0-training-state.rckpt");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("net.0.weight"), std::string::npos);
  EXPECT_NE(r.out.find("cuda:1"), std::string::npos);
  EXPECT_NE(r.out.find("torch_rng_state"), std::string::npos);
  EXPECT_NE(r.out.find("current_epoch"), std::string::npos);
}

TEST(CliTest, InspectJsonHasTheDocumentedKeys) {
  CliRun r = Cli("inspect --json " + kGolden + "v1.0-training-state.rckpt");
  ASSERT_EQ(r.code, 0) << r.err;
  for (const char* key : {"\"schema_version\":1", "\"format_version\":\"1.0\"", "\"metadata\":",
                          "\"sections\":", "\"tensors\":", "\"rng\":", "\"name\":\"net.0.weight\"",
                          "\"dtype\":\"f32\"", "\"shape\":[16,8]", "\"device\":\"cuda:1\"",
                          "\"nbytes\":512", "\"stored_nbytes\":", "\"kind\":\"torch_cpu\"",
                          "\"tree\":"}) {
    EXPECT_NE(r.out.find(key), std::string::npos) << key;
  }
}

TEST(CliTest, VerifyExitsZeroOnlyForASoundFile) {
  CliRun ok = Cli("verify " + kGolden + "v1.0-zstd-shuffle-multichunk.rckpt");
  EXPECT_EQ(ok.code, 0) << ok.err;
  EXPECT_NE(ok.out.find("OK"), std::string::npos);
  CliRun bad = Cli("verify " + kErrors + "chunk-bitflip.corruption.rckpt");
  EXPECT_EQ(bad.code, 4);
  EXPECT_EQ(Lines(bad.err), 1) << bad.err;
  EXPECT_NE(bad.err.find("checksum mismatch"), std::string::npos);
  EXPECT_EQ(Cli("verify " + kErrors + "newer-major-version.unsupported.rckpt").code, 5);
  EXPECT_EQ(Cli("verify /nonexistent/file.rckpt").code, 3);
  EXPECT_EQ(Cli("verify " + kGolden).code, 2);  // a directory
}

TEST(CliTest, PlanRejectsBothPlacementOptionsBeforeOpeningTheFile) {
  CliRun r = Cli("plan /nonexistent.rckpt --map-location cpu --model-device cpu");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("cannot be combined"), std::string::npos) << r.err;
}

TEST(CliTest, PlanAsStoredOnAMachineWithoutTheDeviceExplainsTheFix) {
  CliRun r = Cli("plan " + kGolden + "v1.0-training-state.rckpt --assume-devices 1");
  EXPECT_EQ(r.code, 6);
  EXPECT_NE(r.err.find("cuda:1"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--model-device auto"), std::string::npos) << r.err;
  EXPECT_EQ(Lines(r.err), 1);
}

TEST(CliTest, PlanJsonListsOriginAndTarget) {
  CliRun r = Cli("plan --json " + kGolden +
              "v1.0-training-state.rckpt --map-location cuda:1=cuda:0 --assume-devices 1");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("{\"name\":\"net.0.weight\",\"kind\":\"tensor\",\"section\":\"model\","
                       "\"role\":\"model\",\"origin\":\"cuda:1\",\"target\":\"cuda:0\"}"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("\"name\":\"cuda_rng.1\",\"kind\":\"rng\",\"section\":null,\"role\":"
                       "\"host\",\"origin\":\"cuda:1\",\"target\":\"cpu\""),
            std::string::npos)
      << r.out;
}

TEST(CliTest, PlanRejectsMalformedDevice) {
  CliRun r = Cli("plan " + kGolden + "v1.0-training-state.rckpt --model-device cuda:x");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("cuda:x"), std::string::npos);
}

TEST(CliTest, LoadMapsByDefaultAndNoMapFileReadsTheSameBytes) {
  const std::string file = kGolden + "v1.0-training-state.rckpt";
  CliRun mapped = Cli("load --json --map-location cpu " + file);
  ASSERT_EQ(mapped.code, 0) << mapped.err;
  EXPECT_NE(mapped.out.find("\"mapped\":true"), std::string::npos) << mapped.out;
  CliRun read = Cli("load --json --map-location cpu --no-map-file " + file);
  ASSERT_EQ(read.code, 0) << read.err;
  EXPECT_NE(read.out.find("\"mapped\":false"), std::string::npos) << read.out;
  auto restored = [](const std::string& json) {
    const size_t at = json.find("\"bytes_restored\":");
    return json.substr(at, json.find(',', at) - at);
  };
  EXPECT_EQ(restored(mapped.out), restored(read.out));
  // --map-file, the default, stays accepted; with --no-map-file it is a usage error.
  CliRun text = Cli("load --map-location cpu --map-file " + file);
  ASSERT_EQ(text.code, 0) << text.err;
  EXPECT_NE(text.out.find("into host memory, file mapped"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("staging   none (no device destination)"), std::string::npos);
  CliRun both = Cli("load --map-file --no-map-file " + file);
  EXPECT_EQ(both.code, 2);
  EXPECT_NE(both.err.find("--map-file and --no-map-file contradict each other"), std::string::npos)
      << both.err;
}

TEST(CliTest, LoadOnEmulatedDevicesReportsPlacementAndStaging) {
  CliRun r = Cli("load --json --emulate-devices 2 " + kGolden + "v1.0-training-state.rckpt");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("\"staging_high_water\":"), std::string::npos);
  EXPECT_NE(r.out.find("\"host_unshuffle_reason\":\"\""), std::string::npos) << r.out;
  // The staging the load leased stays in the runtime's pool.
  EXPECT_EQ(r.out.find("\"device_pool\":{\"pinned_bytes\":0,"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"device_pool\":{\"pinned_bytes\":"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"origin\":\"cuda:1\",\"target\":\"cuda:1\""), std::string::npos) << r.out;
  CliRun moved = Cli("load --model-device cuda:0 --emulate-devices 1 " + kGolden +
                  "v1.0-training-state.rckpt");
  ASSERT_EQ(moved.code, 0) << moved.err;
  EXPECT_NE(moved.out.find("cuda:0"), std::string::npos);
}

}  // namespace
}  // namespace rckpt

namespace rckpt {
namespace {

TEST(CliTest, ConvertRoundTripThroughSafetensorsIsIdenticalAndDiffExitsOnDifferences) {
  std::string dir = testing::NewTempDir("convert");
  std::string src = kGolden + "v1.0-training-state.rckpt";
  ASSERT_EQ(Cli("convert " + src + " " + dir + "/s.safetensors").code, 0);
  ASSERT_EQ(Cli("convert " + dir + "/s.safetensors " + dir + "/back.rckpt --codec none").code, 0);
  CliRun same = Cli("diff " + src + " " + dir + "/back.rckpt");
  EXPECT_EQ(same.code, 0) << same.out << same.err;
  ASSERT_EQ(Cli("convert " + src + " " + dir + "/moved.rckpt --set-device cuda:1=cuda:0").code, 0);
  CliRun moved = Cli("diff --json " + src + " " + dir + "/moved.rckpt");
  EXPECT_EQ(moved.code, 1);
  EXPECT_NE(moved.out.find("\"identical\":false"), std::string::npos);
  EXPECT_NE(moved.out.find("origin device cuda:1 vs cuda:0"), std::string::npos) << moved.out;
  EXPECT_EQ(Cli("diff --ignore-devices " + src + " " + dir + "/moved.rckpt").code, 0);
  EXPECT_EQ(Cli("diff " + src + " /nonexistent.rckpt").code, 3);
  EXPECT_EQ(Cli("convert " + src + " " + dir + "/x.rckpt --codec lz4").code, 2);
}

// A DCP directory and the rckpt.dcp.Writer file of the same state
// (tests/data/diff/make_fixtures.py): identical by default, listing what was
// not compared; --strict sees the containers; JSON says which mode ran.
TEST(CliTest, DiffModesAndWhatWasNotCompared) {
  const std::string dcp = std::string(RCKPT_TEST_DATA_DIR) + "/diff/dcp";
  const std::string writer = std::string(RCKPT_TEST_DATA_DIR) + "/diff/writer.rckpt";
  CliRun state = Cli("diff " + dcp + " " + writer);
  EXPECT_EQ(state.code, 0) << state.out << state.err;
  EXPECT_EQ(state.out.rfind("identical: " + dcp + " and " + writer + " hold the same state\n", 0),
            0u) << state.out;
  EXPECT_NE(state.out.find("not compared (A = " + dcp + ", B = " + writer + "):\n"),
            std::string::npos) << state.out;
  EXPECT_NE(state.out.find("  key order: A does not record it"), std::string::npos) << state.out;
  CliRun strict = Cli("diff --strict " + dcp + " " + writer);
  EXPECT_EQ(strict.code, 1) << strict.out;
  EXPECT_NE(strict.out.find("tree model: key 'model' vs 'common' at position 0"),
            std::string::npos) << strict.out;
  EXPECT_EQ(strict.out.find("not compared"), std::string::npos) << strict.out;
  EXPECT_EQ(Cli("diff --tensors-only " + dcp + " " + writer).code, 0);
  CliRun both = Cli("diff --strict --tensors-only " + dcp + " " + writer);
  EXPECT_EQ(both.code, 2);
  EXPECT_EQ(Lines(both.err), 1) << both.err;
  EXPECT_NE(both.err.find("--strict and --tensors-only"), std::string::npos) << both.err;
  CliRun json = Cli("diff --json " + dcp + " " + writer);
  EXPECT_EQ(json.code, 0);
  EXPECT_EQ(json.out.rfind("{\"schema_version\":2,\"mode\":\"state\",", 0), 0u) << json.out;
  EXPECT_NE(json.out.find("\"not_compared\":[{\"what\":\"sections and roles\",\"why\":"),
            std::string::npos) << json.out;
  CliRun strict_json = Cli("diff --json --strict " + dcp + " " + writer);
  EXPECT_NE(strict_json.out.find("\"mode\":\"strict\""), std::string::npos);
  EXPECT_NE(strict_json.out.find("\"not_compared\":[]"), std::string::npos);
}

// Convert says on stderr what the output does not keep (a warning) and what
// only rckpt reads back from it (a note); the result is still written.
TEST(CliTest, ConvertSaysWhatTheOutputDoesNotKeep) {
  std::string dir = testing::NewTempDir("keep");
  const std::string custom = std::string(RCKPT_TEST_DATA_DIR) + "/pytorch/custom_class.pt";
  CliRun dropped = Cli("convert " + custom + " " + dir + "/c.pt --drop-objects");
  ASSERT_EQ(dropped.code, 0) << dropped.err;
  EXPECT_NE(dropped.err.find("rckpt convert: warning: " + dir +
                             "/c.pt does not keep inert object of class "
                             "'mylib.metrics.MetricTracker' at 'metric_tracker'"),
            std::string::npos) << dropped.err;
  EXPECT_EQ(Cli("diff --strict " + custom + " " + dir + "/c.pt").code, 1);
  CliRun st = Cli("convert " + kGolden + "v1.0-training-state.rckpt " + dir + "/t.safetensors");
  ASSERT_EQ(st.code, 0) << st.err;
  EXPECT_NE(st.err.find("rckpt convert: note: " + dir + "/t.safetensors: kept in __metadata__"),
            std::string::npos) << st.err;
  EXPECT_EQ(st.err.find("warning"), std::string::npos) << st.err;
  EXPECT_EQ(Cli("diff --strict " + kGolden + "v1.0-training-state.rckpt " + dir +
                "/t.safetensors").code, 0);
}

}  // namespace
}  // namespace rckpt

namespace rckpt {
namespace {

const std::string kTraining = kGolden + "v1.0-training-state.rckpt";

TEST(CliTest, NoArgumentsIsAUsageErrorWithTheHelpOnStderr) {
  CliRun r = Cli("");
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.out, "");
  EXPECT_NE(r.err.find("usage: rckpt COMMAND"), std::string::npos) << r.err;
}

TEST(CliTest, ConvertLevelOutOfRangeNamesTheFlagAndTheValueTyped) {
  std::string dir = testing::NewTempDir("level");
  CliRun huge = Cli("convert " + kTraining + " " + dir + "/o.rckpt --level 99999999999999");
  EXPECT_EQ(huge.code, 2);
  EXPECT_EQ(Lines(huge.err), 1) << huge.err;
  EXPECT_NE(huge.err.find("--level '99999999999999': expected an integer from -7 to 22"),
            std::string::npos)
      << huge.err;
  CliRun high = Cli("convert " + kTraining + " " + dir + "/o.rckpt --level 23");
  EXPECT_EQ(high.code, 2);
  EXPECT_NE(high.err.find("--level '23'"), std::string::npos) << high.err;
  EXPECT_EQ(Cli("convert " + kTraining + " " + dir + "/o.rckpt --level -7").code, 0);
  CliRun chunk = Cli("convert " + kTraining + " " + dir + "/o.rckpt --chunk-size 0");
  EXPECT_EQ(chunk.code, 2);
  EXPECT_NE(chunk.err.find("--chunk-size '0': expected an integer from 1 to"), std::string::npos)
      << chunk.err;
}

TEST(CliTest, ConvertRefusesADirectoryOrAMissingDirectoryAsOutputBeforeReading) {
  std::string dir = testing::NewTempDir("outpath");
  CliRun is_dir = Cli("convert " + kTraining + " " + dir);
  EXPECT_EQ(is_dir.code, 2);
  EXPECT_EQ(Lines(is_dir.err), 1) << is_dir.err;
  EXPECT_NE(is_dir.err.find("is a directory: expected a file path such as"), std::string::npos)
      << is_dir.err;
  CliRun missing = Cli("convert " + kTraining + " " + dir + "/nodir/x.rckpt");
  EXPECT_EQ(missing.code, 3);
  EXPECT_NE(missing.err.find("directory '" + dir + "/nodir' does not exist"), std::string::npos)
      << missing.err;
  EXPECT_EQ(missing.err.find(".tmp-"), std::string::npos) << missing.err;
}

TEST(CliTest, ConvertNeedsToForAnOutputWithoutAKnownExtensionAndSaysSo) {
  std::string dir = testing::NewTempDir("to");
  CliRun refused = Cli("convert " + kTraining + " " + dir + "/part.ck");
  EXPECT_EQ(refused.code, 2);
  EXPECT_EQ(Lines(refused.err), 1) << refused.err;
  EXPECT_NE(refused.err.find("name its format with --to rckpt|pt|safetensors"), std::string::npos)
      << refused.err;
  EXPECT_FALSE(std::ifstream(dir + "/part.ck").good());
  // --to names the output's format; the input is recognised by content.
  CliRun to_rckpt = Cli("convert " + kTraining + " " + dir + "/part.ck --to rckpt");
  ASSERT_EQ(to_rckpt.code, 0) << to_rckpt.err;
  EXPECT_EQ(Cli("verify " + dir + "/part.ck").code, 0);
  CliRun to_st = Cli("convert " + dir + "/part.ck " + dir + "/out.ck --to safetensors");
  ASSERT_EQ(to_st.code, 0) << to_st.err;
  // --from names the input's format whatever its name.
  CliRun from_st =
      Cli("convert " + dir + "/out.ck " + dir + "/back.rckpt --from safetensors");
  ASSERT_EQ(from_st.code, 0) << from_st.err;
  EXPECT_EQ(Cli("diff " + kTraining + " " + dir + "/back.rckpt").code, 0);
  CliRun to_pt = Cli("convert " + dir + "/part.ck " + dir + "/out.weights --to pt --drop-objects");
  ASSERT_EQ(to_pt.code, 0) << to_pt.err;
  EXPECT_EQ(Cli("inspect " + dir + "/out.weights").code, 0);
  EXPECT_EQ(Cli("convert " + kTraining + " " + dir + "/x.ck --to onnx").code, 2);
}

TEST(CliTest, ConvertOfAnUnrecognisedInputPointsAtFrom) {
  std::string dir = testing::NewTempDir("from");
  std::ofstream(dir + "/notes.dat") << "not a checkpoint\n";
  CliRun r = Cli("convert " + dir + "/notes.dat " + dir + "/out.rckpt");
  EXPECT_EQ(r.code, 5);
  EXPECT_EQ(Lines(r.err), 1) << r.err;
  EXPECT_NE(r.err.find("--from rckpt|pt|safetensors"), std::string::npos) << r.err;
}

// --set-device is MapLocation's syntax: what MapLocation::Parse accepts the
// flag accepts, and a spec it refuses is refused with its message (in flag
// terms), a device mapped twice across repeated flags included.
TEST(CliTest, ConvertSetDeviceAcceptsWhatMapLocationAcceptsWithItsMessage) {
  std::string dir = testing::NewTempDir("setdev");
  const std::string src = kGolden + "v1.0-training-state.rckpt";
  const std::vector<std::string> specs = {
      "cuda:1=cuda:0", "cpu", "cuda:2", "cuda", "cuda:1=cuda:0,cpu=cuda:1", "cuda=cpu",
      "gpu", "cuda:x=cpu", "cuda:1", "cuda:1=cuda:0,cuda:1=cpu", "cuda:1=cuda:0,cpu",
      "cuda:1=", "=cpu", "cuda:1=cuda:0,,cpu=cpu"};
  int n = 0;
  for (const std::string& spec : specs) {
    Result<MapLocation> parsed = MapLocation::Parse(spec, "set_device");
    const std::string out = dir + "/o" + std::to_string(n++) + ".rckpt";
    CliRun r = Cli("convert " + src + " " + out + " --set-device '" + spec + "'");
    if (parsed.ok()) {
      EXPECT_EQ(r.code, 0) << spec << ": " << r.err;
      continue;
    }
    EXPECT_EQ(r.code, 2) << spec;
    EXPECT_EQ(r.err, "rckpt convert: InvalidArgument: --set-device" +
                         parsed.status().message().substr(std::string("set_device").size()) +
                         "\n")
        << spec;
  }
  // Repeated flags are one map: a device mapped twice is refused.
  CliRun twice = Cli("convert " + src + " " + dir + "/t.rckpt --set-device cuda:1=cuda:0 "
                     "--set-device cuda:1=cpu");
  EXPECT_EQ(twice.code, 2);
  EXPECT_NE(twice.err.find("--set-device: device cuda:1 is mapped twice"), std::string::npos)
      << twice.err;
  // One device rewrites every recorded origin.
  ASSERT_EQ(Cli("convert " + src + " " + dir + "/all.rckpt --set-device cuda:3").code, 0);
  CliRun moved = Cli("inspect " + dir + "/all.rckpt");
  EXPECT_EQ(moved.code, 0);
  EXPECT_EQ(moved.out.find("cuda:1"), std::string::npos) << moved.out;
  EXPECT_NE(moved.out.find("cuda:3"), std::string::npos) << moved.out;
}

TEST(CliTest, VerifyReportsNonZeroPaddingAsCorruptionNamingTheOffset) {
  std::string dir = testing::NewTempDir("padding");
  // 100 bytes at offset 64, then padding up to the page-aligned 16 KiB tensor.
  Checkpoint ck;
  ASSERT_OK(ck.AddTensor("model", "small", *Tensor::Zeros(DType::kU8, {100})));
  ASSERT_OK(ck.AddTensor("model", "large", *Tensor::Zeros(DType::kF32, {4096})));
  ASSERT_OK(Save(dir + "/p.rckpt", ck));
  EXPECT_EQ(Cli("verify " + dir + "/p.rckpt").code, 0);
  std::fstream f(dir + "/p.rckpt", std::ios::binary | std::ios::in | std::ios::out);
  f.seekp(1000);
  f.put('\x5a');
  f.close();
  CliRun r = Cli("verify " + dir + "/p.rckpt");
  EXPECT_EQ(r.code, 4);
  EXPECT_EQ(Lines(r.err), 1) << r.err;
  EXPECT_NE(r.err.find("padding byte at offset 1000 is 0x5a, expected 0"), std::string::npos)
      << r.err;
  // Loads do not read the padding (schema/FORMAT.md §4).
  EXPECT_EQ(Cli("load " + dir + "/p.rckpt").code, 0);
}

TEST(CliTest, LoadErrorsNameTheFlagsACliUserTypes) {
  CliRun device = Cli("load " + kTraining);
  EXPECT_EQ(device.code, 6);
  EXPECT_EQ(Lines(device.err), 1) << device.err;
  EXPECT_NE(device.err.find("pass --model-device auto"), std::string::npos) << device.err;
  EXPECT_NE(device.err.find("--map-location (a device such as cpu, or a tag map such as cuda:1=cpu)"),
            std::string::npos)
      << device.err;
  CliRun sections = Cli("load " + kTraining + " --sections nosuch");
  EXPECT_EQ(sections.code, 2);
  EXPECT_NE(sections.err.find("InvalidArgument: --sections: unknown section 'nosuch'; this file's "
                              "sections: model, loss, optimizer"),
            std::string::npos)
      << sections.err;
  CliRun skip = Cli("load " + kTraining + " --skip-sections nosuch");
  EXPECT_NE(skip.err.find("--skip-sections: unknown section"), std::string::npos) << skip.err;
  CliRun both = Cli("load " + kTraining + " --map-location cpu --model-device cpu");
  EXPECT_EQ(both.code, 2);
  EXPECT_NE(both.err.find("--map-location and --model-device cannot be combined"),
            std::string::npos)
      << both.err;
  CliRun garbage = Cli("load " + kTraining + " --map-location garbage");
  EXPECT_EQ(garbage.code, 2);
  EXPECT_NE(garbage.err.find("--map-location: invalid device 'garbage'"), std::string::npos)
      << garbage.err;
  CliRun staging = Cli("load " + kTraining + " --map-location cpu --staging-bytes 0");
  EXPECT_EQ(staging.code, 2);
  EXPECT_NE(staging.err.find("--staging-bytes '0': expected an integer from 1 to"),
            std::string::npos)
      << staging.err;
}

}  // namespace
}  // namespace rckpt

namespace rckpt {
namespace {

TEST(CliTest, ConvertSummaryUsesReadableSizesAndRates) {
  std::string dir = testing::NewTempDir("summary");
  CliRun r = Cli("convert " + kGolden + "v1.0-training-state.rckpt " + dir + "/s.safetensors");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find(": 7 tensors, 3 RNG records, 1.7 KiB in "), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("0.00 GiB/s"), std::string::npos) << r.out;
  EXPECT_TRUE(HasBinaryRate(r.out, ")\n")) << r.out;
  CliRun one = Cli("convert " + std::string(RCKPT_TEST_DATA_DIR) +
                   "/safetensors/model.safetensors " + dir + "/m.rckpt");
  ASSERT_EQ(one.code, 0) << one.err;
  EXPECT_NE(one.out.find(", 1 RNG record, "), std::string::npos) << one.out;
}

}  // namespace
}  // namespace rckpt

namespace rckpt {
namespace {

TEST(CliTest, LoadReportsASmallFilesRateInBinaryUnitsAndAMissingModelDeviceByFlag) {
  CliRun r = Cli("load " + kGolden + "v1.0-training-state.rckpt --emulate-devices 2 "
                 "--model-device auto");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(HasBinaryRate(r.out, "\n")) << r.out;
  EXPECT_EQ(r.out.find("0.00 GiB/s"), std::string::npos) << r.out;
  CliRun missing = Cli("plan " + kGolden + "v1.0-training-state.rckpt --emulate-devices 2 "
                       "--model-device cuda:2");
  EXPECT_EQ(missing.code, 6);
  EXPECT_NE(missing.err.find("DeviceUnavailable: --model-device cuda:2 does not exist"),
            std::string::npos)
      << missing.err;
}

}  // namespace
}  // namespace rckpt

namespace rckpt {
namespace {

// One unit system (IEC binary) in every command's text: the file's 1768 raw
// tensor bytes read "1.7 KiB" in inspect, verify and convert (1.8 KB in
// decimal units), load's 13192 restored bytes (RNG records included) read
// "12.9 KiB", rates are in binary units too, and no decimal unit appears
// anywhere.
TEST(CliTest, EveryCommandPrintsBytesAndRatesInBinaryUnits) {
  const std::string file = kGolden + "v1.0-training-state.rckpt";
  const std::string dir = testing::NewTempDir("units");
  struct Run {
    CliRun run;
    std::vector<std::string> sizes;
    std::string after_rate;  // what follows the rate; "" when there is none
  };
  const std::vector<Run> runs = {
      {Cli("inspect " + file), {"1.7 KiB raw, 1.7 KiB stored"}, ""},
      {Cli("verify " + file), {"1.7 KiB stored, 1.7 KiB raw"}, ")\n"},
      {Cli("convert " + file + " " + dir + "/u.safetensors"), {"1.7 KiB in "}, ")\n"},
      {Cli("load " + file + " --emulate-devices 2 --model-device auto"),
       {"12.9 KiB (13192 bytes)", " of 64.0 MiB pinned"}, "\n"}};
  for (const auto& [r, sizes, after_rate] : runs) {
    ASSERT_EQ(r.code, 0) << r.err;
    for (const std::string& e : sizes) EXPECT_NE(r.out.find(e), std::string::npos) << e;
    if (!after_rate.empty()) {
      EXPECT_TRUE(HasBinaryRate(r.out, after_rate)) << r.out;
    }
    for (const char* decimal : {" kB", " KB", " MB", " GB", " TB"}) {
      EXPECT_EQ(r.out.find(decimal), std::string::npos) << decimal << " in\n" << r.out;
    }
  }
}

TEST(CliTest, ImportErrorsQuoteThePathLikeRckptErrors) {
  std::string hostile = std::string(RCKPT_TEST_DATA_DIR) + "/pytorch/hostile_eval.pt";
  CliRun r = Cli("convert " + hostile + " " + testing::NewTempDir("hostile") + "/h.rckpt");
  EXPECT_EQ(r.code, 5);
  EXPECT_EQ(Lines(r.err), 1) << r.err;
  EXPECT_NE(r.err.find("Unsupported: '" + hostile + "': pickle: refusing global 'builtins.eval'"),
            std::string::npos)
      << r.err;
  std::string dir = testing::NewTempDir("badst");
  { std::ofstream(dir + "/text.safetensors") << "hello\n"; }
  CliRun st = Cli("inspect " + dir + "/text.safetensors");
  EXPECT_EQ(st.code, 4);
  EXPECT_EQ(Lines(st.err), 1) << st.err;
  EXPECT_NE(st.err.find("Corruption: '" + dir + "/text.safetensors': "), std::string::npos)
      << st.err;
}

}  // namespace
}  // namespace rckpt

namespace rckpt {
namespace {

TEST(CliTest, DoctorWithoutADriverSaysWhyAndExitsZero) {
  CliRun r = Cli("doctor --cuda-driver /nonexistent/libcuda.so.1");
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("devices: none (/nonexistent/libcuda.so.1 was not found"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("OK: no GPU here"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("kernel image: cubins sm_75"), std::string::npos) << r.out;
  CliRun json = Cli("doctor --json --cuda-driver /nonexistent/libcuda.so.1");
  EXPECT_EQ(json.code, 0);
  EXPECT_NE(json.out.find("\"schema_version\":1"), std::string::npos) << json.out;
  EXPECT_NE(json.out.find("\"usable\":true"), std::string::npos) << json.out;
  // A fresh process's pool holds nothing; its cap is the default.
  EXPECT_NE(json.out.find("\"device_pool\":{\"pinned_bytes\":0,\"pinned_cap\":536870912,"),
            std::string::npos)
      << json.out;
  EXPECT_NE(r.out.find("device pool: 0 B pinned of a 512.0 MiB cap"), std::string::npos) << r.out;
  EXPECT_EQ(Cli("doctor FILE").code, 2);
}

TEST(CliTest, DoctorListsTheStandinsDevicesAndExitsSixForAnOldDriver) {
  if (CudaStandinPath().empty()) GTEST_SKIP() << "built without the CUDA runtime";
  CliRun r = Cli("doctor --cuda-driver " + CudaStandinPath());
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("cuda:0  10111213-1415-1617-1819-1a1b1c1d1e1f  rckpt stand-in GPU"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("cuda:1"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("un-shuffle: on the device (kernel loaded)"), std::string::npos);
  EXPECT_NE(r.out.find("pinned memory: 64.0 MiB allocated and freed"), std::string::npos);
  CliRun bad{};
  {
    const std::string cmd = "RCKPT_STANDIN_DRIVER_VERSION=11000 " + kCli + " doctor --cuda-driver " +
                            CudaStandinPath() + " >/dev/null 2>&1";
    const int status = std::system(cmd.c_str());
    bad.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  EXPECT_EQ(bad.code, 6) << "a driver below CUDA 11.4 is a problem";
}

TEST(CliTest, PlanSaysWhatModelDeviceAutoMeansHereAndWhy) {
  CliRun none = Cli("plan " + kGolden + "v1.0-training-state.rckpt --model-device auto "
                    "--cuda-driver /nonexistent/libcuda.so.1");
  ASSERT_EQ(none.code, 0) << none.err;
  EXPECT_NE(none.out.find("model_device auto: cpu (no GPU: /nonexistent/libcuda.so.1 was not found"),
            std::string::npos)
      << none.out;
  CliRun two = Cli("plan " + kGolden + "v1.0-training-state.rckpt --model-device auto "
                   "--emulate-devices 2");
  ASSERT_EQ(two.code, 0) << two.err;
  EXPECT_NE(two.out.find("model_device auto: cuda:0 (this process's current CUDA device"),
            std::string::npos)
      << two.out;
  if (UsingCudaStandin()) return;  // there --emulate-devices already is a --cuda-driver
  CliRun both = Cli("plan " + kGolden + "v1.0-training-state.rckpt --emulate-devices 2 "
                    "--cuda-driver /x");
  EXPECT_EQ(both.code, 2);
  EXPECT_NE(both.err.find("--emulate-devices and --cuda-driver are incompatible"),
            std::string::npos)
      << both.err;
}

// Under torchrun each rank's LOCAL_RANK names its GPU; the CLI has no CUDA
// context of its own, so that is its current device.
TEST(CliTest, BareCudaIsThisProcesssOwnDevice) {
  setenv("LOCAL_RANK", "3", 1);
  CliRun r = Cli("plan --json " + kGolden +
                 "v1.0-training-state.rckpt --map-location cuda --emulate-devices 4");
  CliRun model = Cli("plan --json " + kGolden +
                     "v1.0-training-state.rckpt --model-device cuda --emulate-devices 4");
  unsetenv("LOCAL_RANK");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("\"name\":\"net.0.weight\",\"kind\":\"tensor\",\"section\":\"model\","
                       "\"role\":\"model\",\"origin\":\"cuda:1\",\"target\":\"cuda:3\""),
            std::string::npos)
      << r.out;
  ASSERT_EQ(model.code, 0) << model.err;
  EXPECT_NE(model.out.find("\"origin\":\"cuda:1\",\"target\":\"cuda:3\""), std::string::npos)
      << model.out;
}

TEST(CliTest, DoctorExaminesThisProcesssDeviceAndEveryOneOnlyWhenAsked) {
  if (CudaStandinPath().empty()) GTEST_SKIP() << "built without the CUDA runtime";
  setenv("LOCAL_RANK", "1", 1);
  CliRun r = Cli("doctor --cuda-driver " + CudaStandinPath());
  CliRun json = Cli("doctor --json --cuda-driver " + CudaStandinPath());
  unsetenv("LOCAL_RANK");
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("needs a driver for CUDA 12.0 or newer"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("(R525) or newer"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("sm_90  (this process's device)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("not examined: not this process's device (--all-devices examines it)"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("through cuda:1's context"), std::string::npos) << r.out;
  EXPECT_NE(json.out.find("\"current_device\":1"), std::string::npos) << json.out;
  EXPECT_NE(json.out.find("\"kernel_min_driver_version\":12000"), std::string::npos) << json.out;
  CliRun all = Cli("doctor --all-devices --cuda-driver " + CudaStandinPath());
  EXPECT_EQ(all.code, 0) << all.out << all.err;
  EXPECT_EQ(all.out.find("not examined"), std::string::npos) << all.out;
  EXPECT_NE(all.out.find("un-shuffle: on the device"), all.out.rfind("un-shuffle: on the device"))
      << "both devices examined: " << all.out;
}

}  // namespace
}  // namespace rckpt
