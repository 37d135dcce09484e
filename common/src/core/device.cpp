// Which device, and what is missing where CUDA is asked for: see core/device.h.
#include "dtlab/core/device.h"

#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <torch/cuda.h>

#include <cstdlib>

#include "dtlab/core/cuda_half.h"
#include "dtlab/core/error.h"

namespace dtlab {

CudaAvailability cuda_availability() {
  static const CudaAvailability answer = [] {
    CudaAvailability c;
    // libc10_cuda registers CUDA's device guard when it loads: a LibTorch without CUDA has none,
    // nor does a process that did not load the CUDA half (core/cuda_half.h).
    c.in_libtorch = c10::impl::hasDeviceGuardImpl(c10::DeviceType::CUDA);
    if (c.in_libtorch) c.devices = static_cast<int>(torch::cuda::device_count());
    const CudaHalf& half = cuda_half();
    if (half.built && !half.loaded && !half.in_every_program) c.half_not_loaded = half.why_not;
    return c;
  }();
  return answer;
}

std::string why_no_cuda(const CudaAvailability& cuda) {
  if (!cuda.in_libtorch && !cuda.half_not_loaded.empty()) {
    // Note [The CUDA half where a GPU is] (core/cuda_half.h).
    return "the CUDA half of this build (" DTLAB_TORCH_DESCRIPTION ") is not loaded: " + cuda.half_not_loaded;
  }
  if (!cuda.in_libtorch) {
    return std::string("this build of dtlab has no CUDA (") + DTLAB_TORCH_DESCRIPTION +
           "): build it against a CUDA torch (docs/SETUP.md, A GPU node)";
  }
  if (cuda.devices > 0) return "";
  const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
  if (visible && std::string(visible).empty()) return "no GPU is visible: CUDA_VISIBLE_DEVICES is empty";
  return "no GPU is visible to this process (no NVIDIA GPU or driver on this machine" +
         std::string(visible ? ", CUDA_VISIBLE_DEVICES=" + std::string(visible) : "") + ")";
}

void require_cuda(const CudaAvailability& cuda, const std::string& what, const std::string& instead) {
  const std::string why = why_no_cuda(cuda);
  if (!why.empty()) throw Error(what + " needs a CUDA GPU, but " + why + "; " + instead);
}

void require_backend_usable(const std::string& backend, const CudaAvailability& cuda) {
  if (backend == "nccl") require_cuda(cuda, "--backend nccl", "use --backend gloo on this machine");
}

torch::Device rank_device(const std::string& backend, int rank, int local_rank, const CudaAvailability& cuda) {
  if (backend != "nccl") return torch::kCPU;
  require_backend_usable(backend, cuda);
  if (local_rank < 0 || local_rank >= cuda.devices) {
    throw Error("--backend nccl: rank " + std::to_string(rank) + " is local rank " + std::to_string(local_rank) +
                " of its host, which has " + std::to_string(cuda.devices) + " GPU" + (cuda.devices == 1 ? "" : "s") +
                " visible: start at most one rank per GPU on each host");
  }
  return {torch::kCUDA, static_cast<c10::DeviceIndex>(local_rank)};
}

torch::Device stage_device(int index, const CudaAvailability& cuda) {
  if (index < 0) throw Error("pipeline device " + std::to_string(index) + " is negative");
  if (!why_no_cuda(cuda).empty()) return torch::kCPU;
  if (index >= cuda.devices) {
    throw Error("pipeline device " + std::to_string(index) + " is not a GPU of this machine (" +
                std::to_string(cuda.devices) + " visible: 0.." + std::to_string(cuda.devices - 1) +
                "): use at most " + std::to_string(cuda.devices) +
                " --stages, or a layout whose device numbers are GPUs (layers may share one)");
  }
  return {torch::kCUDA, static_cast<c10::DeviceIndex>(index)};
}

torch::Device parse_device(const std::string& text, const std::string& flag) {
  if (text == "cpu") return torch::kCPU;
  if (text == "cuda") return {torch::kCUDA, 0};
  const std::string prefix = "cuda:";
  if (text.rfind(prefix, 0) == 0 && text.size() > prefix.size() && text.size() <= prefix.size() + 3 &&
      text.find_first_not_of("0123456789", prefix.size()) == std::string::npos) {
    return {torch::kCUDA, static_cast<c10::DeviceIndex>(std::stoi(text.substr(prefix.size())))};
  }
  throw Error(flag + " " + text + " is not a device: use cpu, cuda or cuda:N");
}

torch::Device device_of(const torch::nn::Module& module) {
  const std::vector<torch::Tensor> parameters = module.parameters();
  return parameters.empty() ? torch::Device(torch::kCPU) : parameters.front().device();
}

void use_device(const torch::Device& device) {
  if (!device.is_cuda()) return;
  c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA)->setDevice(device);
}

void synchronize_device(const torch::Device& device) {
  if (device.is_cuda()) torch::cuda::synchronize(device.has_index() ? device.index() : -1);
}

}  // namespace dtlab
