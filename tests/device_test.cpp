// Note [Devices] (core/device.h): which device a rank or a pipeline stage computes on, and the
// one-line errors where CUDA is asked for and missing. The decisions take what LibTorch says about
// CUDA as a value, so that GPU machines of any size are tested on this CPU.
#include <gtest/gtest.h>

#include "dtlab/core/device.h"
#include "dtlab/core/error.h"
#include "test_util.h"

using dtlab::CudaAvailability;

namespace {
const CudaAvailability kNoCudaBuild{false, 0};
const CudaAvailability kNoGpu{true, 0};
const CudaAvailability kTwoGpus{true, 2};
}  // namespace

TEST(Devices, WhyNoCudaNamesWhatIsMissing) {
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

// The build that links the CUDA half (cuda=yes at configure) must find CUDA registered at run
// time (libtorch_cuda.so is linked even though the kit calls nothing in it directly: a linker
// that dropped it would leave a "CUDA" build without CUDA); the other builds must not.
TEST(Devices, ThisProcessHasCudaExactlyWhenTheBuildLinkedIt) {
  const CudaAvailability cuda = dtlab::cuda_availability();
  EXPECT_EQ(cuda.in_libtorch, DTLAB_HAVE_CUDA == 1);
  if (!cuda.in_libtorch) {
    EXPECT_EQ(cuda.devices, 0);
  }
  EXPECT_EQ(dtlab::why_no_cuda(cuda).empty(), cuda.in_libtorch && cuda.devices > 0);
}

TEST(Devices, UseAndSynchronizeOnTheCpuDoNothing) {
  dtlab::use_device(torch::kCPU);
  dtlab::synchronize_device(torch::kCPU);
  torch::nn::Linear layer(2, 3);
  EXPECT_EQ(dtlab::device_of(*layer), torch::Device(torch::kCPU));
  EXPECT_EQ(dtlab::device_of(torch::nn::Module()), torch::Device(torch::kCPU)) << "no parameters";
}
