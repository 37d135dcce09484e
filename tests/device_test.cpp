// Note [Devices] (core/device.h): which device a rank or a pipeline stage computes on, and the
// one-line errors where CUDA is asked for and missing. The decisions take what LibTorch says about
// CUDA as a value, so that GPU machines of any size are tested on this CPU.
#include <gtest/gtest.h>

#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "dtlab/core/cuda_half.h"
#include "dtlab/core/device.h"
#include "dtlab/core/error.h"
#include "test_util.h"

using dtlab::CudaAvailability;

namespace {
const CudaAvailability kNoCudaBuild{false, 0, ""};
const CudaAvailability kNoGpu{true, 0, ""};
const CudaAvailability kTwoGpus{true, 2, ""};
const CudaAvailability kHalfNotLoaded{false, 0, "this machine has no NVIDIA driver (no /dev/nvidiactl)"};
#ifdef USE_C10D_NCCL
constexpr bool kNcclBuilt = true;
#else
constexpr bool kNcclBuilt = false;
#endif
}  // namespace

TEST(Devices, WhyNoCudaNamesWhatIsMissing) {
  EXPECT_NE(dtlab::why_no_cuda(kHalfNotLoaded).find("CUDA half of this build"), std::string::npos);
  EXPECT_NE(dtlab::why_no_cuda(kHalfNotLoaded).find("no /dev/nvidiactl"), std::string::npos) << "says why";
  EXPECT_EQ(dtlab::why_no_cuda(kNoCudaBuild).find("CUDA half"), std::string::npos) << "a build without one";
  EXPECT_NE(dtlab::why_no_cuda(kNoCudaBuild).find("has no CUDA"), std::string::npos);
  EXPECT_NE(dtlab::why_no_cuda(kNoCudaBuild).find("LibTorch"), std::string::npos) << "names the LibTorch built with";
  EXPECT_NE(dtlab::why_no_cuda(kNoGpu).find("no GPU is visible"), std::string::npos);
  EXPECT_EQ(dtlab::why_no_cuda(kTwoGpus), "");
}

TEST(Devices, GlooRanksComputeOnTheCpuWhateverTheMachineHas) {
  for (const CudaAvailability& cuda : {kNoCudaBuild, kNoGpu, kTwoGpus}) {
    EXPECT_EQ(dtlab::rank_device("gloo", 3, 1, cuda), torch::Device(torch::kCPU));
  }
}

TEST(Devices, NcclRanksTakeTheGpuOfTheirLocalRank) {
  EXPECT_EQ(dtlab::rank_device("nccl", 4, 0, kTwoGpus), torch::Device(torch::kCUDA, 0));
  EXPECT_EQ(dtlab::rank_device("nccl", 5, 1, kTwoGpus), torch::Device(torch::kCUDA, 1));
  // A third rank on a host of two GPUs: named, with what to do.
  EXPECT_THROW_WITH(dtlab::rank_device("nccl", 6, 2, kTwoGpus), dtlab::Error, "rank 6 is local rank 2");
  EXPECT_THROW_WITH(dtlab::rank_device("nccl", 6, 2, kTwoGpus), dtlab::Error, "2 GPUs visible");
}

TEST(Devices, NcclWithoutCudaIsOneLineThatSaysWhatIsMissingAndTheWayOut) {
  for (const CudaAvailability& cuda : {kNoCudaBuild, kNoGpu}) {
    try {
      dtlab::rank_device("nccl", 0, 0, cuda);
      ADD_FAILURE() << "no error";
    } catch (const dtlab::Error& e) {
      const std::string what = e.what();
      EXPECT_EQ(what.find('\n'), std::string::npos) << what;
      EXPECT_NE(what.find("--backend nccl needs a CUDA GPU"), std::string::npos) << what;
      EXPECT_NE(what.find("--backend gloo"), std::string::npos) << what;
      EXPECT_NE(what.find(dtlab::why_no_cuda(cuda)), std::string::npos) << what;
    }
  }
}

TEST(Devices, PipelineDeviceNumbersAreGpusWhereCudaIsAndCpuWorkersWhereItIsNot) {
  EXPECT_EQ(dtlab::stage_device(0, kTwoGpus), torch::Device(torch::kCUDA, 0));
  EXPECT_EQ(dtlab::stage_device(1, kTwoGpus), torch::Device(torch::kCUDA, 1));
  EXPECT_THROW_WITH(dtlab::stage_device(2, kTwoGpus), dtlab::Error, "pipeline device 2 is not a GPU");
  for (const CudaAvailability& cuda : {kNoCudaBuild, kNoGpu}) {
    EXPECT_EQ(dtlab::stage_device(0, cuda), torch::Device(torch::kCPU));
    EXPECT_EQ(dtlab::stage_device(7, cuda), torch::Device(torch::kCPU)) << "a CPU worker of any number";
  }
  EXPECT_THROW_WITH(dtlab::stage_device(-1, kTwoGpus), dtlab::Error, "negative");
}

TEST(Devices, ParseDeviceTakesCpuCudaAndCudaIndex) {
  EXPECT_EQ(dtlab::parse_device("cpu", "--device"), torch::Device(torch::kCPU));
  EXPECT_EQ(dtlab::parse_device("cuda", "--device"), torch::Device(torch::kCUDA, 0));
  EXPECT_EQ(dtlab::parse_device("cuda:3", "--device"), torch::Device(torch::kCUDA, 3));
  for (const char* bad : {"gpu", "cuda:", "cuda:x", "cuda:-1", "CPU", "cuda:1:2", "cuda:12345"}) {
    EXPECT_THROW_WITH(dtlab::parse_device(bad, "--device"), dtlab::Error, std::string("--device ") + bad);
  }
}

// Note [The CUDA half where a GPU is] (core/cuda_half.h): a process of a build with a CUDA half
// loads it at start exactly where the machine has a GPU driver (or DTLAB_CUDA_HALF says), and CUDA
// is then registered; where it was not loaded, why_no_cuda says why. Builds without one never do.
TEST(Devices, TheCudaHalfIsLoadedAtStartExactlyWhereAGpuDriverIs) {
  const dtlab::CudaHalf& half = dtlab::cuda_half();
  EXPECT_EQ(half.built, DTLAB_HAVE_CUDA == 1);
  const char* asked = std::getenv("DTLAB_CUDA_HALF");
  const std::string setting = asked ? asked : "";
  const bool driver = ::access("/dev/nvidiactl", F_OK) == 0 || ::access("/dev/dxg", F_OK) == 0;
  EXPECT_EQ(half.loaded, half.built && (setting == "load" || (setting != "skip" && (driver || half.in_every_program))))
      << half.why_not;
  const CudaAvailability cuda = dtlab::cuda_availability();
  EXPECT_EQ(cuda.in_libtorch, half.loaded || half.in_every_program);
  if (!cuda.in_libtorch) {
    EXPECT_EQ(cuda.devices, 0);
  }
  EXPECT_EQ(dtlab::why_no_cuda(cuda).empty(), cuda.in_libtorch && cuda.devices > 0);
  EXPECT_EQ(cuda.half_not_loaded.empty(), !half.built || half.loaded || half.in_every_program);
  if (half.built && !half.loaded && !half.in_every_program) {
    EXPECT_NE(dtlab::why_no_cuda(cuda).find("CUDA half of this build"), std::string::npos) << dtlab::why_no_cuda(cuda);
    EXPECT_NE(dtlab::why_no_cuda(cuda).find(half.why_not), std::string::npos) << dtlab::why_no_cuda(cuda);
  }
}

// The library itself, loaded on request whatever the machine (in a child process, so that the test
// above sees the start-up's own decision): it must register CUDA with LibTorch (a link that dropped
// libtorch_cuda.so would leave a "CUDA" build without CUDA) and carry ProcessGroupNCCL's maker.
TEST(Devices, TheCudaHalfLoadedOnRequestRegistersCudaAndTheNcclGroup) {
  EXPECT_EXIT(
      {
        const dtlab::CudaHalf& half = dtlab::load_cuda_half();
        bool ok = half.loaded == (DTLAB_HAVE_CUDA == 1);
        const bool guard = c10::impl::hasDeviceGuardImpl(c10::DeviceType::CUDA);
        const bool nccl_expected = half.loaded && kNcclBuilt;
        const bool nccl = dtlab::cuda_half_symbol("dtlab_make_nccl_group") != nullptr;
        ok = ok && guard == (half.loaded || half.in_every_program) && nccl == nccl_expected;
        std::fprintf(stderr, "loaded=%d (%s) cuda-guard=%d nccl-maker=%d\n", half.loaded, half.why_not.c_str(), guard,
                     nccl);
        std::exit(ok ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

TEST(Devices, UseAndSynchronizeOnTheCpuDoNothing) {
  dtlab::use_device(torch::kCPU);
  dtlab::synchronize_device(torch::kCPU);
  torch::nn::Linear layer(2, 3);
  EXPECT_EQ(dtlab::device_of(*layer), torch::Device(torch::kCPU));
  EXPECT_EQ(dtlab::device_of(torch::nn::Module()), torch::Device(torch::kCPU)) << "no parameters";
}
