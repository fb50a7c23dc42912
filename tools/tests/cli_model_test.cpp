// Runs `memfmt plan` and `memfmt run` on networks written by the library (io/network_json.hpp from
// the models header) and on the committed ONNX models: plans against the library's own plan_with,
// the DOT picture's conversion edges against the plan, outputs against the executor run in-process
// and against PyTorch's recorded outputs (tests/onnx/data/*.safetensors, recorded by
// tools/export_onnx.py), and exit codes 1 (bad file, missing backend) and 2 (bad arguments).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "memfmt/backends/reference/backend.hpp"
#include "memfmt/graph/models.hpp"
#include "memfmt/graph/cost_model.hpp"
#include "memfmt/graph/policy.hpp"
#include "memfmt/graph/solve.hpp"
#include "memfmt/graph/timing_cache.hpp"
#include "memfmt/io/network_json.hpp"
#include "memfmt/io/safetensors.hpp"
#include "memfmt/io/timing_cache_json.hpp"
#include "memfmt/runtime/calibrate.hpp"
#include "memfmt/runtime/executor.hpp"
#include "memfmt/runtime/random_parameters.hpp"
#include "model_test_util.hpp"
#include "run_cli.hpp"
#ifdef MEMFMT_CLI_TEST_HAVE_CUDNN
#include "memfmt/backends/cudnn/status.hpp"
#endif

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using memfmt::format_family;
using memfmt::graph::network;
using memfmt_test::expect_usage_errors;
using memfmt_test::random_input;
using memfmt_test::run_cli;

// A directory of this test process's own, removed at the end.
class CliModel : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("memfmt_cli_model_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  // The network written to a file as `memfmt plan` reads it.
  std::string save(const network& net, const std::string& name) const {
    const std::string p = path(name);
    memfmt::io::write_network_file(p, net);
    return p;
  }

  fs::path dir_;
};

memfmt::graph::models::options tiny() {
  memfmt::graph::models::options o;
  o.batch = 2;
  o.resolution = 32;
  o.width = 0.125;
  o.classes = 10;
  return o;
}

json parse_json(const memfmt_test::run_result& r) {
  try {
    return json::parse(r.output);
  } catch (const json::parse_error& e) {
    ADD_FAILURE() << "not JSON: " << e.what() << "\n" << r.output;
    return json::object();
  }
}

// ---- memfmt plan ----

TEST_F(CliModel, PlanGivesTheLibrarysPlanForEveryPolicy) {
  const network net = memfmt::graph::models::unet(tiny());
  const std::string file = save(net, "unet.json");
  const memfmt::graph::cost_model model;
  for (const auto which : memfmt::graph::all_policies) {
    const auto r = run_cli({"plan", file, "--policy", to_string(which), "--json"}, false);
    ASSERT_EQ(r.exit_code, 0) << to_string(which) << ": " << r.output;
    const json j = parse_json(r);
    const memfmt::graph::plan want = memfmt::graph::plan_with(net, model, which);
    EXPECT_EQ(j.at("policy"), to_string(which));
    ASSERT_EQ(j.at("layers").size(), net.size());
    for (const auto& n : net.nodes()) {
      const auto& f = want.format(n.id);
      EXPECT_EQ(j["layers"][n.id]["format"], f ? json(to_string(*f)) : json(nullptr))
          << to_string(which) << " " << n.name;
    }
    EXPECT_EQ(j.at("totals").at("copies").get<std::size_t>(), want.copies()) << to_string(which);
    EXPECT_EQ(j.at("totals").at("total_ns").get<memfmt::graph::cost_t>(), want.total()) << to_string(which);
  }
  // The text report is the explanation of the plan.
  const auto text = run_cli({"plan", file}, false);
  ASSERT_EQ(text.exit_code, 0) << text.output;
  EXPECT_NE(text.output.find("format plan: " + std::to_string(net.size()) + " layers"), std::string::npos)
      << text.output;
}

TEST_F(CliModel, CompareListsEveryPolicy) {
  const network net = memfmt::graph::models::unet(tiny());
  const std::string file = save(net, "unet.json");
  const auto text = run_cli({"plan", file, "--compare"}, false);
  ASSERT_EQ(text.exit_code, 0) << text.output;
  for (const auto which : memfmt::graph::all_policies)
    EXPECT_NE(text.output.find(std::string("\n") + to_string(which) + " "), std::string::npos)
        << to_string(which) << " missing:\n"
        << text.output;

  const auto r = run_cli({"plan", file, "--compare", "--json"}, false);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const json rows = parse_json(r).at("policies");
  ASSERT_EQ(rows.size(), memfmt::graph::all_policies.size());
  const memfmt::graph::cost_model model;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const auto which = memfmt::graph::all_policies[i];
    const memfmt::graph::plan want = memfmt::graph::plan_with(net, model, which);
    EXPECT_EQ(rows[i].at("policy"), to_string(which));
    EXPECT_EQ(rows[i].at("conversions").get<std::size_t>(), want.copies()) << to_string(which);
    EXPECT_EQ(rows[i].at("estimated_ns").get<memfmt::graph::cost_t>(), want.total()) << to_string(which);
  }
}

// Counts the DOT edges marked as conversions: one per (converted value, consumer) pair.
std::size_t conversion_edges(const std::string& dot) {
  std::size_t n = 0;
  for (std::size_t at = dot.find("class=conversion"); at != std::string::npos;
       at = dot.find("class=conversion", at + 1))
    ++n;
  return n;
}

TEST_F(CliModel, DotMarksEveryConversionOfThePlan) {
  const network net = memfmt::graph::models::unet(tiny());
  const std::string file = save(net, "unet.json");
  std::size_t seen = 0;
  for (const char* which : {"pytorch_eager", "greedy", "optimal"}) {
    const std::string dot = path(std::string(which) + ".dot");
    const auto r = run_cli({"plan", file, "--policy", which, "--json", "--dot", dot}, false);
    ASSERT_EQ(r.exit_code, 0) << which << ": " << r.output;
    const json plan = parse_json(r);
    std::size_t pairs = 0;
    for (const auto& c : plan.at("conversions")) pairs += c.at("consumers").size();
    std::ifstream in(dot);
    ASSERT_TRUE(in) << which << ": no DOT file written";
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_EQ(text.rfind("digraph", 0), 0u) << which;
    EXPECT_EQ(conversion_edges(text), pairs) << which;
    seen += pairs;
  }
  EXPECT_GT(seen, 0u) << "no policy converted anything: the edge count was not tested";
}

TEST_F(CliModel, MalformedNetworkFilesNameTheLineOrKey) {
  const std::string syntax = path("syntax.json");
  std::ofstream(syntax) << "{\n  \"format\": \"memfmt.network\",\n  \"version\": 1,,\n  \"nodes\": []\n}\n";
  auto r = run_cli({"plan", syntax});
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("line 3"), std::string::npos) << r.output;

  json j = memfmt::io::network_to_json(memfmt::graph::models::resnet18(tiny()));
  j["nodes"][3].erase("kind");
  const std::string missing = path("missing.json");
  std::ofstream(missing) << j.dump(1);
  r = run_cli({"plan", missing});
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("nodes[3]"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("'kind'"), std::string::npos) << r.output;

  r = run_cli({"plan", path("absent.json")});
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("absent.json"), std::string::npos) << r.output;
}

TEST_F(CliModel, BadArgumentsExit2WithUsage) {
  const std::string file = save(memfmt::graph::models::resnet18(tiny()), "resnet18.json");
  const std::vector<std::vector<std::string>> bad = {
      {"plan"},
      {"plan", file, "--policy", "fastest"},
      {"plan", file, "--policy", "optimal", "--compare"},
      {"plan", file, "--calibrate", "tpu"},
      {"plan", file, "--no-such-flag"},
      {"run"},
      {"run", file, "--dtype", "int8"},
      {"run", file, "--input", file, "--random"},
      {"run", file, "--batch", "0"},
      {"run", file, "--repeat", "-1"},
      {"run", file, "--backend", "tpu"},
      {"run", file, "--policy", "fastest"},
  };
  expect_usage_errors(bad);
}

// Signatures a network's timing cache must hold after calibrating on a backend that runs them all.
std::set<std::string> layer_signatures(const network& net) {
  std::set<std::string> s;
  for (const auto& n : net.nodes())
    if (const auto sig = memfmt::graph::layer_signature(net, n.id)) s.insert(*sig);
  return s;
}

TEST_F(CliModel, CalibrateReferenceWritesTheCacheAndPlansWithIt) {
  const network net = memfmt::graph::models::resnet18(tiny());
  const std::string file = save(net, "resnet18.json"), cache = path("cache.json");
  auto r = run_cli({"plan", file, "--calibrate", "reference", "--cache", cache});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("[costs: measured]"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("timing cache written to " + cache), std::string::npos) << r.output;
  const memfmt::graph::timing_cache c =
      memfmt::io::read_timing_cache_file(cache, calibration_key(memfmt::reference::backend{}));
  std::set<std::string> timed;
  for (const auto& [sig, t] : c.layers()) {
    timed.insert(sig);
    EXPECT_TRUE(t[0] && t[1] && *t[0] > 0 && *t[1] > 0) << sig;
  }
  EXPECT_EQ(timed, layer_signatures(net));

  // Everything is in the cache now: nothing is timed again, and --cache alone plans with it.
  r = run_cli({"plan", file, "--calibrate", "reference", "--cache", cache});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find(": 0 layer signatures timed, " + std::to_string(timed.size()) + " from the cache"),
            std::string::npos)
      << r.output;
  r = run_cli({"plan", file, "--cache", cache, "--json"}, false);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(parse_json(r).dump().find("measured on "), std::string::npos);
}

TEST_F(CliModel, PriorsFileReplacesTheCompiledInTable) {
  const network net = memfmt::graph::models::resnet18(tiny());
  const std::string file = save(net, "resnet18.json");
  auto r = run_cli({"plan", file, "--priors", std::string(MEMFMT_CLI_TEST_PRIORS) + "/cudnn_gpu.json"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("prior: bench_conv_cudnn"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("prior: bench_conv "), std::string::npos) << r.output;
  std::ofstream(path("bad_priors.json")) << R"({"format": "memfmt.priors", "version": 1})";
  r = run_cli({"plan", file, "--priors", path("bad_priors.json")});
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("key 'backend_family' is missing"), std::string::npos) << r.output;
}

// Whether cuDNN runs here (this build has it, and a CUDA device), and what the CLI says when not.
bool cudnn_runs_here() {
#ifdef MEMFMT_CLI_TEST_HAVE_CUDNN
  return memfmt::cudnn::device_count() > 0;
#else
  return false;
#endif
}
#ifdef MEMFMT_CLI_TEST_HAVE_CUDNN
const char* const cudnn_missing = "no CUDA device (cudaGetDeviceCount returned ";
#else
const char* const cudnn_missing = "built without cuDNN";
#endif

TEST_F(CliModel, CalibrationAndMissingBackendsAreClearErrors) {
  const std::string file = save(memfmt::graph::models::resnet18(tiny()), "resnet18.json");
  auto r = run_cli({"plan", file, "--calibrate", "onednn", "--cache", path("onednn.json")});
#ifdef MEMFMT_CLI_TEST_HAVE_ONEDNN
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(memfmt::io::read_timing_cache_file(path("onednn.json")).key().backend, "onednn");
#else
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("built without oneDNN"), std::string::npos) << r.output;
#endif
  if (!cudnn_runs_here()) {  // with a GPU, cuDNN calibration and runs are cli_streams_test's
    r = run_cli({"plan", file, "--calibrate", "cudnn"});
    EXPECT_EQ(r.exit_code, 1) << r.output;
    EXPECT_NE(r.output.find(cudnn_missing), std::string::npos) << r.output;
    r = run_cli({"run", file, "--backend", "cudnn"});
    EXPECT_EQ(r.exit_code, 1) << r.output;
    EXPECT_NE(r.output.find(cudnn_missing), std::string::npos) << r.output;
  }
  r = run_cli({"plan", file, "--cache", path("absent.json")});
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("does not exist; add --calibrate BACKEND"), std::string::npos) << r.output;

  // Another device's cache is refused naming whose it is, with or without --calibrate.
  const memfmt::graph::cache_key here = calibration_key(memfmt::reference::backend{});
  memfmt::io::write_timing_cache_file(
      path("other.json"), memfmt::graph::timing_cache({"Other CPU 1234", "reference", here.backend_version}));
  for (const std::vector<std::string>& extra :
       {std::vector<std::string>{}, std::vector<std::string>{"--calibrate", "reference"}}) {
    std::vector<std::string> args{"plan", file, "--cache", path("other.json")};
    args.insert(args.end(), extra.begin(), extra.end());
    r = run_cli(args);
    EXPECT_EQ(r.exit_code, 1) << r.output;
    EXPECT_NE(r.output.find("holds the measurements of device 'Other CPU 1234', backend reference"), std::string::npos)
        << r.output;
  }
  std::ofstream(path("bad.json")) << R"({"format": "memfmt.timing_cache", "version": 1, "device": "x",
    "backend": "reference", "backend_version": "1", "layers": [{"signature": "s", "channels_first_ns": "slow"}],
    "conversions": []})";
  r = run_cli({"plan", file, "--cache", path("bad.json"), "--calibrate", "reference"});
  EXPECT_EQ(r.exit_code, 1) << r.output;
  r = run_cli({"plan", file, "--cache", path("bad.json")});
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("layers[0]: key 'channels_first_ns' must be an integer"), std::string::npos) << r.output;

#ifndef MEMFMT_CLI_TEST_HAVE_ONEDNN
  r = run_cli({"run", file, "--backend", "onednn"});
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("built without oneDNN"), std::string::npos) << r.output;
#endif
}

// ---- memfmt run ----

TEST_F(CliModel, RunRandomReportsThroughputAndThePlan) {
  const network net = memfmt::graph::models::resnet18(tiny());
  const std::string file = save(net, "resnet18.json");
  const auto text = run_cli({"run", file, "--random", "--repeat", "2", "--threads", "1"});
  ASSERT_EQ(text.exit_code, 0) << text.output;
  for (const char* what : {"images/s", "ms per batch", "conversions", "fusions", "peak activations"})
    EXPECT_NE(text.output.find(what), std::string::npos) << what << " missing:\n" << text.output;

  for (const char* which : {"all_channels_first", "pytorch_eager", "optimal"}) {
    const auto r = run_cli({"run", file, "--policy", which, "--batch", "3", "--repeat", "2", "--json"}, false);
    ASSERT_EQ(r.exit_code, 0) << which << ": " << r.output;
    const json j = parse_json(r);
    const memfmt::graph::plan want =
        memfmt::graph::plan_with(memfmt::graph::models::resnet18([] {
                                   auto o = tiny();
                                   o.batch = 3;
                                   return o;
                                 }()),
                                 memfmt::graph::cost_model{}, memfmt::graph::parse_policy(which));
    EXPECT_EQ(j.at("batch"), 3) << which;
    EXPECT_EQ(j.at("conversions_run").get<std::size_t>(), want.copies()) << which;
    EXPECT_GT(j.at("images_per_second").get<double>(), 0.0) << which;
    EXPECT_GT(j.at("ms_per_batch").get<double>(), 0.0) << which;
    EXPECT_GT(j.at("peak_activation_bytes").get<std::int64_t>(), 0) << which;
    EXPECT_LE(j.at("peak_activation_bytes").get<std::int64_t>(), j.at("allocate_all_bytes").get<std::int64_t>());
  }
}

// --profile: the time by layer kind covers the layers that run (each conv class and function named),
// adds up to no more than the pass, and the slowest layers come in order, each a layer of the network.
TEST_F(CliModel, RunProfileSaysWhereTheTimeGoes) {
  const network net = memfmt::graph::models::mobilenet_v2(tiny());
  const std::string file = save(net, "mobilenet.json");
  const auto r = run_cli({"run", file, "--policy", "all_channels_last", "--repeat", "2", "--profile", "--json"}, false);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const json p = parse_json(r).at("profile");
  EXPECT_EQ(p.at("passes"), 2);
  std::map<std::string, std::size_t> kinds;
  double sum = 0;
  for (const json& k : p.at("by_kind")) {
    kinds[k.at("kind").get<std::string>()] = k.at("layers").get<std::size_t>();
    sum += k.at("ms").get<double>();
  }
  EXPECT_LE(sum, p.at("ms_per_pass").get<double>() * (1 + 1e-9));
  std::size_t depthwise = 0, pointwise = 0;
  for (const auto& n : net.nodes())
    if (n.kind == memfmt::layer_kind::conv) {
      const auto& a = n.get<memfmt::graph::conv_attrs>();
      if (a.params.groups > 1) ++depthwise;
      else if (a.kernel[0] == 1 && a.kernel[1] == 1) ++pointwise;
    }
  EXPECT_EQ(kinds["conv depthwise"], depthwise);
  EXPECT_EQ(kinds["conv 1x1"], pointwise);
  EXPECT_EQ(kinds["conv kxk"], 1u);  // the stem
  // The one conversion, of the input, is made on entry (the inputs' time); the logits are rank 2.
  EXPECT_EQ(parse_json(r).at("conversions_run"), 1);
  EXPECT_EQ(kinds["conversions"], 0u);
  EXPECT_EQ(kinds.count("activation relu6"), 0u);  // fused into its conv, timed there
  const json& slowest = p.at("slowest");
  ASSERT_EQ(slowest.size(), 10u);
  for (std::size_t i = 0; i < slowest.size(); ++i) {
    const auto id = net.find(slowest[i].at("layer").get<std::string>());
    ASSERT_TRUE(id) << slowest[i].dump();
    // Every value with a layout is channels-last; the classifier's rank-2 values have none (null),
    // and one of them is among the ten slowest when the machine is busy.
    EXPECT_EQ(slowest[i].at("format"), net.at(*id).spatial() ? json("channels_last") : json(nullptr))
        << slowest[i].dump();
    if (i) {
      EXPECT_LE(slowest[i].at("ms").get<double>(), slowest[i - 1].at("ms").get<double>());
    }
  }
  const auto text = run_cli({"run", file, "--repeat", "1", "--profile"});
  ASSERT_EQ(text.exit_code, 0) << text.output;
  EXPECT_NE(text.output.find("slowest layers:"), std::string::npos) << text.output;
}

// --weights and --input in, --output out: the CLI's outputs in each plan equal the executor's
// all-channels-first run in this process (the formats change the summation order of nothing but
// the batch-norm folding, hence the tolerance).
TEST_F(CliModel, RunWithFilesMatchesTheExecutorInProcess) {
  const network net = memfmt::graph::models::mobilenet_v2(tiny());
  const std::string file = save(net, "mobilenet.json");
  const auto params = memfmt::runtime::random_parameters(net, 7);
  memfmt::io::save_safetensors(params, path("weights.safetensors"));
  const auto& in = net.at(*net.find("input"));
  std::vector<float> x = random_input(net, 3);  // forward takes it mutable
  memfmt::graph::parameter_store inputs;
  inputs.insert<float>("input", in.extents, x);
  memfmt::io::save_safetensors(inputs, path("input.safetensors"));

  // The truth: the executor in this process, every layer channels-first, nothing fused.
  const memfmt::graph::plan first =
      memfmt::graph::plan_with(net, memfmt::graph::cost_model{}, memfmt::graph::policy::all_channels_first);
  memfmt::reference::backend backend;
  memfmt::runtime::executor<memfmt::reference::backend> ex(net, first, backend, params, {false, false});
  std::map<std::string, std::vector<float>> want;
  std::map<std::string, memfmt::runtime::tensor_ref> outs;
  for (const auto& n : net.nodes())
    if (n.kind == memfmt::layer_kind::output) {
      want[n.name].resize(static_cast<std::size_t>(n.numel()));
      outs[n.name] = memfmt::runtime::tensor_ref{n.type, n.extents, format_family::channels_first, want[n.name].data()};
    }
  ex.forward({{"input", memfmt::runtime::tensor_ref{in.type, in.extents, format_family::channels_first, x.data()}}},
             outs);

  // The policies, and the plan --calibrate picks by timing on this machine (whichever it is).
  const std::string cache = path("cache.json");
  const std::vector<std::vector<std::string>> plans{{"--policy", "all_channels_first"},
                                                    {"--policy", "all_channels_last"},
                                                    {"--policy", "optimal"},
                                                    {"--calibrate", "--cache", cache}};
  for (const auto& plan_args : plans) {
    const std::string which = plan_args.back() == cache ? "calibrated" : plan_args.back();
    const std::string out = path(which + ".safetensors");
    std::vector<std::string> args{
        "run", file,       "--weights", path("weights.safetensors"), "--input", path("input.safetensors"), "--output",
        out,   "--repeat", "1"};
    args.insert(args.end(), plan_args.begin(), plan_args.end());
    const auto r = run_cli(args);
    ASSERT_EQ(r.exit_code, 0) << which << ": " << r.output;
    const auto got = memfmt::io::load_safetensors(out);
    ASSERT_EQ(got.size(), want.size()) << which;
    for (const auto& [name, w] : want) {
      const auto g = got.at(name).values<float>(name);
      ASSERT_EQ(g.size(), w.size()) << which << " " << name;
      for (std::size_t i = 0; i < w.size(); ++i)
        ASSERT_NEAR(g[i], w[i], 1e-4 + 1e-4 * std::fabs(w[i])) << which << " " << name << "[" << i << "]";
    }
  }
}

// --calibrate measures every layer signature of the network on --backend into the cache, times the
// three candidate plans and runs the one it reports; a second run measures nothing again.
TEST_F(CliModel, RunCalibrateMeasuresThenRunsTheFastestCandidate) {
  const network net = memfmt::graph::models::resnet18(tiny());
  const std::string file = save(net, "resnet18.json"), cache = path("cache.json");
  std::map<std::string, std::string> first_timings;  // signature -> "channels-first ns/channels-last ns"
  for (int round = 0; round < 2; ++round) {
    const auto r = run_cli({"run", file, "--calibrate", "--cache", cache, "--repeat", "1", "--json"}, false);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    const json j = parse_json(r);
    const json& c = j.at("calibration");
    EXPECT_EQ(c.at("backend"), "reference");
    EXPECT_EQ(c.at("layer_signatures").get<std::size_t>(), layer_signatures(net).size());
    std::set<std::string> names;
    const json* chosen = nullptr;
    for (const json& k : c.at("candidates")) {
      names.insert(k.at("plan").get<std::string>());
      EXPECT_EQ(k.at("error"), "") << k.dump();
      if (k.at("plan") == c.at("chosen")) chosen = &k;
    }
    EXPECT_EQ(names, (std::set<std::string>{"optimal_calibrated", "optimal_priors", "all_channels_last"}));
    ASSERT_NE(chosen, nullptr) << c.dump();
    EXPECT_EQ(j.at("policy"), c.at("chosen"));
    EXPECT_EQ(j.at("conversions_run"), chosen->at("conversions")) << j.dump();
    const memfmt::graph::timing_cache written =
        memfmt::io::read_timing_cache_file(cache, calibration_key(memfmt::reference::backend{}));
    std::map<std::string, std::string> timed;
    for (const auto& [sig, t] : written.layers())
      timed[sig] = std::to_string(t[0].value_or(-1)) + "/" + std::to_string(t[1].value_or(-1));
    std::set<std::string> signatures;
    for (const auto& [sig, t] : timed) signatures.insert(sig);
    EXPECT_EQ(signatures, layer_signatures(net));
    if (round == 0) first_timings = timed;
    else EXPECT_EQ(timed, first_timings) << "the second run re-measured what the cache held";
  }

  // --cache needs something timed, and --calibrate chooses the plan itself.
  const auto untimed = run_cli({"run", file, "--cache", cache});
  EXPECT_EQ(untimed.exit_code, 2) << untimed.output;
  EXPECT_NE(untimed.output.find("--cache: nothing is timed on --backend reference without --calibrate"),
            std::string::npos)
      << untimed.output;
  const auto both = run_cli({"run", file, "--calibrate", "--policy", "optimal"});
  EXPECT_EQ(both.exit_code, 2) << both.output;
  EXPECT_NE(both.output.find("--policy excludes --calibrate"), std::string::npos) << both.output;
  EXPECT_EQ(run_cli({"run", file, "--calibrate", "--priors-only"}).exit_code, 2);
  EXPECT_EQ(run_cli({"run", file, "--priors-only", "--cache", cache}).exit_code, 2);
}

// On a backend that is a speed target, the optimal policy is solved over the layers timed there:
// the run reports measured costs, fills the cache with every layer signature, and runs the plan
// graph::solve gives over that cache; --priors-only runs the priors' plan; other policies weigh no
// costs and time nothing.
TEST_F(CliModel, RunOptimalOnOnednnPlansOverTheLayersTimedThere) {
#ifndef MEMFMT_CLI_TEST_HAVE_ONEDNN
  GTEST_SKIP() << "this build has no oneDNN backend";
#else
  const network net = memfmt::graph::models::mobilenet_v2(tiny());
  const std::string file = save(net, "mobilenet.json"), cache = path("cache.json");
  auto r = run_cli({"run", file, "--backend", "onednn", "--cache", cache, "--repeat", "1", "--json"}, false);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  json j = parse_json(r);
  EXPECT_EQ(j.at("policy"), "optimal");
  EXPECT_EQ(j.at("costs").at("source"), "measured") << j.dump();
  EXPECT_EQ(j.at("costs").at("layer_signatures").get<std::size_t>(), layer_signatures(net).size());
  EXPECT_FALSE(j.contains("calibration"));
  const memfmt::graph::timing_cache timed = memfmt::io::read_timing_cache_file(cache);
  EXPECT_EQ(timed.key().backend, "onednn");
  std::set<std::string> signatures;
  for (const auto& [sig, t] : timed.layers()) signatures.insert(sig);
  EXPECT_EQ(signatures, layer_signatures(net));
  memfmt::graph::cost_model measured;
  measured.set_timing_cache(timed);
  const memfmt::graph::plan want = memfmt::graph::solve(net, measured);
  EXPECT_EQ(j.at("conversions_run").get<std::size_t>(), want.copies()) << j.dump();
  EXPECT_EQ(j.at("plan").at("estimated_ns").get<std::int64_t>(), want.total()) << j.dump();

  r = run_cli({"run", file, "--backend", "onednn", "--priors-only", "--repeat", "1", "--json"}, false);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  j = parse_json(r);
  EXPECT_EQ(j.at("costs").at("source"), "priors");
  const memfmt::graph::plan priors = memfmt::graph::solve(net, memfmt::graph::cost_model{});
  EXPECT_EQ(j.at("plan").at("estimated_ns").get<std::int64_t>(), priors.total()) << j.dump();

  r = run_cli({"run", file, "--backend", "onednn", "--policy", "all_channels_last", "--repeat", "1"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output.find("costs "), std::string::npos) << r.output;
  r = run_cli({"run", file, "--backend", "onednn", "--policy", "all_channels_last", "--cache", cache});
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--policy all_channels_last (only optimal's costs are timed)"), std::string::npos)
      << r.output;
  r = run_cli({"run", file, "--backend", "onednn", "--policy", "all_channels_last", "--repeat", "1", "--json"}, false);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(parse_json(r).at("costs").at("source"), "none");
#endif
}

TEST_F(CliModel, RunRefusesParametersThatDoNotFit) {
  const network net = memfmt::graph::models::resnet18(tiny());
  const std::string file = save(net, "resnet18.json");
  auto params = memfmt::runtime::random_parameters(net, 1);
  params.insert<float>("stray.weight", {2}, {1.f, 2.f});
  memfmt::io::save_safetensors(params, path("weights.safetensors"));
  const auto r = run_cli({"run", file, "--weights", path("weights.safetensors")});
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("stray.weight"), std::string::npos) << r.output;

  memfmt::graph::parameter_store wrong;
  wrong.insert<float>("input", {1, 3, 8, 8}, std::vector<float>(192, 0.f));
  memfmt::io::save_safetensors(wrong, path("input.safetensors"));
  const auto q = run_cli({"run", file, "--input", path("input.safetensors")});
  EXPECT_EQ(q.exit_code, 1) << q.output;
  EXPECT_NE(q.output.find("[1, 3, 8, 8]"), std::string::npos) << q.output;
}

#ifdef MEMFMT_CLI_TEST_ONNX_DATA

std::string onnx_file(const char* name) { return std::string(MEMFMT_CLI_TEST_ONNX_DATA) + "/" + name; }

TEST_F(CliModel, RunsTheCommittedOnnxModels) {
  for (const char* model : {"small_resnet18.onnx", "small_mobilenet_v2.onnx"}) {
    const auto r = run_cli({"run", onnx_file(model), "--random", "--repeat", "2"});
    ASSERT_EQ(r.exit_code, 0) << model << ": " << r.output;
    EXPECT_NE(r.output.find("images/s"), std::string::npos) << r.output;
    const auto p = run_cli({"plan", onnx_file(model), "--compare"});
    EXPECT_EQ(p.exit_code, 0) << model << ": " << p.output;
  }
  // The ResNet-18's batch is symbolic: --batch sets it.
  const auto r = run_cli({"run", onnx_file("small_resnet18.onnx"), "--batch", "4", "--repeat", "1", "--json"}, false);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(parse_json(r).at("batch"), 4);
}

// PyTorch's outputs for the recorded input (the same .safetensors holds both): every plan gives
// them, in float32 to rounding and in bfloat16 within its precision.
TEST_F(CliModel, OnnxOutputsMatchPyTorchInEveryPlan) {
#ifdef MEMFMT_CLI_TEST_HAVE_ONEDNN
  const std::vector<const char*> backends{"reference", "onednn"};
#else
  const std::vector<const char*> backends{"reference"};
#endif
  for (const char* model : {"small_resnet18", "small_mobilenet_v2"}) {
    const std::string fixture = onnx_file((std::string(model) + ".safetensors").c_str());
    const auto recorded = memfmt::io::load_safetensors(fixture).at("output").values<float>("output");
    float scale = 0;
    for (float v : recorded) scale = std::max(scale, std::fabs(v));
    for (const char* which : {"all_channels_first", "all_channels_last", "pytorch_eager", "optimal"})
      for (const char* dtype : {"float32", "bfloat16"})
        for (const char* backend : backends) {
          const std::string out = path(std::string(model) + which + dtype + backend + ".safetensors");
          const auto r =
              run_cli({"run", onnx_file((std::string(model) + ".onnx").c_str()), "--input", fixture, "--output", out,
                       "--policy", which, "--dtype", dtype, "--repeat", "1", "--backend", backend});
          // oneDNN computes bfloat16 only on CPUs with AVX-512; elsewhere it says so before running.
          if (r.exit_code == 1 && std::string(backend) == "onednn" && std::string(dtype) == "bfloat16" &&
              r.output.find("avx512") != std::string::npos)
            continue;
          ASSERT_EQ(r.exit_code, 0) << model << " " << which << " " << dtype << " " << backend << ": " << r.output;
          const auto written = memfmt::io::load_safetensors(out);
          const auto& t = written.at("output");
          std::vector<float> got;
          if (t.type == memfmt::dtype::bfloat16)
            for (auto v : t.values<memfmt::bfloat16>()) got.push_back(static_cast<float>(v));
          else got = t.values<float>();
          ASSERT_EQ(got.size(), recorded.size());
          const float tol = std::string(dtype) == "float32" ? 1e-5f : 0.02f * scale;
          for (std::size_t i = 0; i < got.size(); ++i)
            ASSERT_NEAR(got[i], recorded[i], tol)
                << model << " " << which << " " << dtype << " " << backend << " output[" << i << "]";
        }
  }
}

TEST_F(CliModel, MalformedOrUnsupportedOnnxIsAClearError) {
  const std::string bad = path("garbage.onnx");
  std::ofstream(bad, std::ios::binary) << "this is not a protobuf \x01\x02\x03";
  for (const char* cmd : {"plan", "run"}) {
    const auto r = run_cli({cmd, bad});
    EXPECT_EQ(r.exit_code, 1) << cmd << ": " << r.output;
    EXPECT_NE(r.output.find("garbage.onnx"), std::string::npos) << cmd << ": " << r.output;
  }
  // An op without a memfmt layer: planned around, refused for running, naming the op and node.
  const std::string hardmax = std::string(MEMFMT_CLI_TEST_DATA) + "/hardmax.onnx";
  const auto plan = run_cli({"plan", hardmax});
  EXPECT_EQ(plan.exit_code, 0) << plan.output;
  EXPECT_NE(plan.output.find("op 'Hardmax' (ONNX node 'hardmax')"), std::string::npos) << plan.output;
  // --json: the plan document and --compare's rows list the barrier with its opaque node, a layer
  // of the plan.
  std::string opaque_node;
  for (const bool compare : {false, true}) {
    std::vector<std::string> args{"plan", hardmax, "--json"};
    if (compare) args.push_back("--compare");
    const auto r = run_cli(args, false);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    const json doc = parse_json(r);
    const json& barriers = doc.at("opaque_barriers");
    ASSERT_EQ(barriers.size(), 1u) << barriers.dump();
    EXPECT_EQ(barriers[0].at("op"), "Hardmax");
    EXPECT_EQ(barriers[0].at("onnx_node"), "hardmax");
    EXPECT_NE(barriers[0].at("reason").get<std::string>(), "");
    const std::string node = barriers[0].at("node").get<std::string>();
    if (compare) {
      EXPECT_EQ(node, opaque_node);
      continue;
    }
    opaque_node = node;
    std::size_t matches = 0;
    for (const json& layer : doc.at("layers"))
      if (layer.at("name") == node && layer.at("kind") == "opaque") ++matches;
    EXPECT_EQ(matches, 1u) << node << " in " << doc.at("layers").dump();
  }
  const auto run = run_cli({"run", hardmax});
  EXPECT_EQ(run.exit_code, 1) << run.output;
  EXPECT_NE(run.output.find("cannot run 1 ONNX node"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("op 'Hardmax' (ONNX node 'hardmax')"), std::string::npos) << run.output;

  // A fixed batch cannot be changed.
  const auto r = run_cli({"run", onnx_file("small_groupnorm_net.onnx"), "--batch", "2"});
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("fixed batch"), std::string::npos) << r.output;
}

#endif

}  // namespace
