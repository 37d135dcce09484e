// What the step benchmarks (bench_task1, bench_gpt2) share: the flags --profile, --plain and
// --versus_plain, and the runner of the last.
//
// --versus_plain ROUNDS: the kit's step against the same model written the obvious way
// (model/ops.h: torch::nn::Linear's forward, torch::dropout, glibc's allocator defaults), each
// side a fresh process of this benchmark (`--plain` for the obvious one), the order alternating
// from round to round so that a slow spell of a shared machine falls on both. Prints each round's
// s/iter and kit / plain, then the median: a regression of the kit's own step shows here, without
// Python (bench/compare_eager.py compares with eager PyTorch).
//
// --device cpu|cuda|cuda:N (default cpu): where the model, the batch and the step run. On CUDA the
// clock is read after torch::cuda::synchronize(), and the figures add the share of the GPU's
// nominal peak (Note [Share of the peak]). Without --device (or with --device cpu) the benches
// print exactly what they printed before the flag existed.
#pragma once

#include <ATen/DynamicLibrary.h>
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <torch/types.h>
#include <torch/version.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "dtlab/core/device.h"
#include "dtlab/core/error.h"
#include "dtlab/tooling/process.h"

namespace dtlab::bench {

struct StepBenchFlags {
  std::filesystem::path profile;  // --profile DIR (report/profile.h)
  bool plain = false;             // --plain (model/ops.h)
  int versus_plain = 0;           // --versus_plain ROUNDS
  std::string device = "cpu";     // --device cpu|cuda|cuda:N
};

// what_plain: what --plain changes in this benchmark's model.
inline void add_step_bench_flags(CLI::App& app, StepBenchFlags& f, const std::string& what_plain) {
  app.add_option("--profile", f.profile,
                 "After the timed steps, profile 3 more of each model into DIR/<model>/ "
                 "(trace.json, profile.txt; report/profile.h)");
  app.add_flag("--plain", f.plain, "Time the same model written the obvious way (model/ops.h: " + what_plain +
                                       ", glibc's allocator defaults)");
  app.add_option("--versus_plain", f.versus_plain,
                 "Instead: ROUNDS rounds of the kit's step and --plain's, each in a fresh process, alternating");
  app.add_option("--device", f.device,
                 "Where the model and the step run: cpu, cuda (cuda:0) or cuda:N; on CUDA the figures add the "
                 "share of the GPU's nominal fp32 peak")
      ->capture_default_str();
}

// --device's text as a device, checked before anything else runs: a CUDA device this process
// cannot use is a dtlab::Error (one line, exit code 2) at once, not a failure inside the step
// (Note [Devices], core/device.h).
inline torch::Device bench_device(const std::string& text) {
  const torch::Device device = dtlab::parse_device(text, "--device");
  if (!device.is_cuda()) return device;
  const dtlab::CudaAvailability cuda = dtlab::cuda_availability();
  dtlab::require_cuda(cuda, "--device " + text, "run with --device cpu");
  if (device.index() >= cuda.devices) {
    throw Error(fmt::format("--device {}: this process sees {} GPU{} (cuda:0{})", text, cuda.devices,
                            cuda.devices == 1 ? "" : "s",
                            cuda.devices > 1 ? fmt::format(" to cuda:{}", cuda.devices - 1) : ""));
  }
  return device;
}

// Waits for the device's queued work before a clock is read (CUDA); nothing on the CPU.
inline void synchronize(const torch::Device& device) { dtlab::synchronize_device(device); }

// The GPU's name as the driver reports it ("NVIDIA H100 80GB HBM3"), through the driver API
// (libcuda.so.1, loaded by LibTorch's CUDA half already): no CUDA header is needed, so this
// compiles against every LibTorch. "" where the driver does not answer.
inline std::string cuda_device_name(int index) {
  try {
    static at::DynamicLibrary driver("libcuda.so.1", nullptr, /*leak_handle=*/true);
    using Init = int (*)(unsigned int);
    using Get = int (*)(int*, int);
    using GetName = int (*)(char*, int, int);
    auto init = reinterpret_cast<Init>(driver.sym("cuInit"));
    auto get = reinterpret_cast<Get>(driver.sym("cuDeviceGet"));
    auto get_name = reinterpret_cast<GetName>(driver.sym("cuDeviceGetName"));
    int device = 0;
    char name[256] = {0};
    if (init(0) != 0 || get(&device, index) != 0 || get_name(name, sizeof(name) - 1, device) != 0) return "";
    return name;
  } catch (const std::exception&) {
    return "";
  }
}

// Note [Share of the peak]: on CUDA the benches divide the FLOPs of a step by its seconds and by
// the GPU's nominal peak. The FLOPs are the bench's own estimate printed under its table: the
// usual 6 x parameters x tokens (6*N*T, a multiply-add forward and two backward per weight and
// token) plus attention's QK^T and PV (12*L*S*H*T); elementwise work is not counted. The peak is
// the data sheet's, not a measurement, and the fp32 one: the kit trains in float32 with TF32 off
// (LibTorch's default for matmuls), so fp32 is the ceiling it can reach. The bf16 dense
// tensor-core peak is printed beside it for scale only.
struct NominalPeak {
  std::string gpu;            // the data sheet's model
  double fp32_tflops = 0;     // FP32, non-tensor
  double bf16_tflops = 0;     // BF16 tensor core, dense (no sparsity)
};

// Keyed by the name the driver reports; the first entry whose words all appear wins.
inline std::optional<NominalPeak> nominal_peak(const std::string& device_name) {
  struct Entry {
    std::vector<std::string> words;
    NominalPeak peak;
  };
  static const std::vector<Entry> table = {
      {{"GH200"}, {"GH200 (H100 SXM's GPU)", 67, 989}},
      {{"H200", "NVL"}, {"H200 NVL", 60, 835}},
      {{"H200"}, {"H200 SXM (H100 SXM's compute)", 67, 989}},
      {{"H100", "NVL"}, {"H100 NVL", 60, 835}},
      {{"H100", "PCIe"}, {"H100 PCIe", 51, 756}},
      {{"H100"}, {"H100 SXM", 67, 989}},
      {{"A100"}, {"A100", 19.5, 312}},
  };
  for (const Entry& e : table) {
    if (std::all_of(e.words.begin(), e.words.end(),
                    [&](const std::string& w) { return device_name.find(w) != std::string::npos; })) {
      return e.peak;
    }
  }
  return std::nullopt;
}

// What the benches print and record about a CUDA device.
struct DeviceInfo {
  torch::Device device{torch::kCPU};
  std::string name;                 // the GPU's name ("" on the CPU)
  std::optional<NominalPeak> peak;  // where the table knows the GPU
};

inline DeviceInfo describe_device(const torch::Device& device) {
  DeviceInfo d;
  d.device = device;
  if (device.is_cuda()) {
    d.name = cuda_device_name(device.index());
    d.peak = nominal_peak(d.name);
  }
  return d;
}

// The header line of a CUDA run ("  device   cuda:0 ..."): the device, its name, the peak used.
inline std::string device_line(const DeviceInfo& d) {
  std::string line = fmt::format("  device   {} ({})", d.device.str(), d.name.empty() ? "name unknown" : d.name);
  if (d.peak) {
    line += fmt::format("; nominal fp32 peak {:g} TFLOP/s ({} data sheet, not measured; bf16 dense {:g})",
                        d.peak->fp32_tflops, d.peak->gpu, d.peak->bf16_tflops);
  } else {
    line += "; no nominal peak known for it (bench/step_bench.h: nominal_peak), so no share of the peak";
  }
  return line + "\n  timing   on CUDA the clock is read after torch::cuda::synchronize()\n";
}

// Share of the nominal fp32 peak of flops_per_second; nullopt without a peak.
inline std::optional<double> peak_share(const DeviceInfo& d, double flops_per_second) {
  if (!d.peak || d.peak->fp32_tflops <= 0) return std::nullopt;
  return flops_per_second / (d.peak->fp32_tflops * 1e12);
}

// Under the table of a CUDA run: each model's share of the peak, and what it means.
inline void print_peak_shares(const DeviceInfo& d, const std::vector<std::pair<std::string, double>>& flops_per_second) {
  if (!d.device.is_cuda()) return;
  if (!d.peak) {
    fmt::print("share of the GPU's peak: not computed, no nominal peak known for '{}'\n", d.name);
    return;
  }
  fmt::print("share of the GPU's nominal fp32 peak ({:g} TFLOP/s, {}; the kit trains in float32, TF32 off):",
             d.peak->fp32_tflops, d.peak->gpu);
  for (const auto& [model, f] : flops_per_second) fmt::print(" {} {:.1f}%", model, 100 * *peak_share(d, f));
  fmt::print("\n  = (FLOPs/iter above: 6*N*T, the usual 6 x parameters x tokens, + attention) / (s/iter) / peak; "
             "the peak is nominal (data sheet), not measured\n");
}

// The JSON of a CUDA run's device (environment.device).
inline nlohmann::json device_json(const DeviceInfo& d) {
  nlohmann::json j = {{"device", d.device.str()}, {"name", d.name}};
  if (d.peak) {
    j["nominal_peak"] = {{"gpu", d.peak->gpu},
                         {"fp32_tflops", d.peak->fp32_tflops},
                         {"bf16_dense_tflops", d.peak->bf16_tflops},
                         {"used", "fp32"},
                         {"source", "data sheet, nominal, not measured"}};
  }
  return j;
}

inline double seconds_per_iteration(const std::vector<std::string>& argv) {
  const ProcessResult r = run_process(argv, 3600);
  if (r.exit_code != 0) {
    throw Error(fmt::format("{} failed (exit {}):\n{}", argv.front(), r.exit_code,
                            r.output.substr(r.output.size() > 2000 ? r.output.size() - 2000 : 0)));
  }
  // The JSON is the last line (--json -).
  std::string last = r.output;
  while (!last.empty() && last.back() == '\n') last.pop_back();
  last = last.substr(last.rfind('\n') == std::string::npos ? 0 : last.rfind('\n') + 1);
  return nlohmann::json::parse(last).at("models").at(0).at("seconds_per_iteration").at("mean").get<double>();
}

inline int versus_plain(const std::vector<std::string>& shared_flags, const std::vector<std::string>& models,
                        int rounds) {
  if (rounds < 1) throw Error("--versus_plain: the number of rounds must be at least 1");
  const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  fmt::print("kit's step against the obvious step (--plain: torch::nn::Linear, torch::dropout, glibc's "
             "allocator defaults), {} rounds, fresh processes, order alternating\n", rounds);
  for (const std::string& model : models) {
    std::vector<double> ratios;
    for (int r = 0; r < rounds; ++r) {
      std::vector<std::string> kit = {self, "--models", model, "--json", "-"};
      kit.insert(kit.end(), shared_flags.begin(), shared_flags.end());
      std::vector<std::string> plain = kit;
      plain.push_back("--plain");
      double kit_s = 0, plain_s = 0;
      if (r % 2 == 0) {
        kit_s = seconds_per_iteration(kit);
        plain_s = seconds_per_iteration(plain);
      } else {
        plain_s = seconds_per_iteration(plain);
        kit_s = seconds_per_iteration(kit);
      }
      ratios.push_back(kit_s / plain_s);
      fmt::print("  {} round {} ({} first): kit {:.3f} s/iter, plain {:.3f} s/iter, kit/plain {:.3f}\n", model, r + 1,
                 r % 2 == 0 ? "kit" : "plain", kit_s, plain_s, ratios.back());
      std::fflush(stdout);
    }
    std::vector<double> sorted = ratios;
    std::sort(sorted.begin(), sorted.end());
    const size_t n = sorted.size();
    const double median = n % 2 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
    fmt::print("{}: kit/plain median {:.3f} over {} rounds (min {:.3f}, max {:.3f})\n", model, median, n,
               sorted.front(), sorted.back());
  }
  return 0;
}

}  // namespace dtlab::bench
