// The bytes of every CPU tensor's storage a process holds, counted where LibTorch allocates them:
// what the process's tensors take at its peak, parameters, gradients, optimiser state,
// activations and communication buffers together (the zero exercise's figure of what a rank holds
// beside the parts the kit measures one by one). Neither the allocator's caching nor the memory of
// the communication library (Gloo's own buffers) is in it: it is the tensors' storage, not the
// process's resident set.
//
// Note [Counting allocator]: LibTorch takes CPU memory from the allocator of the highest priority
// given to c10::SetCPUAllocator. The meter wraps the one in place (the default) at a higher
// priority: each allocation is the wrapped allocator's, recorded with its size under its data
// pointer (which is also the context of the DataPtr handed out, as LibTorch's raw_allocate
// requires), and the deleter subtracts it. Storage allocated before install() is not counted
// (install it before the model is built). Process-wide, for the rest of the process: there is one
// CPU allocator.
#pragma once

#include <cstdint>

namespace dtlab::report {

class TensorBytes {
 public:
  // The process's meter; the first call installs it (later calls return the same).
  static TensorBytes& install();
  // nullptr until install().
  static TensorBytes* installed();

  int64_t current() const;  // bytes of storage alive now
  int64_t peak() const;     // the most alive at once since the last reset_peak (or install)
  void reset_peak();        // peak := current
  // The largest single storage allocated since the last reset_largest (or install): what the
  // biggest tensor of a step took (tp's logits slice, Note [Bytes of a tensor-parallel step]).
  int64_t largest() const;
  void reset_largest();
  // Every byte allocated since install(), freed or not: the volume of a computation's tensors,
  // which grows with its work and, unlike its CPU time, not with what else runs on the machine
  // (cp's balance check compares the ranks' ring attention by it).
  int64_t allocated() const;

  virtual ~TensorBytes() = default;

 protected:
  TensorBytes() = default;
};

}  // namespace dtlab::report
