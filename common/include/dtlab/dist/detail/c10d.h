// The seam between dtlab's Group and c10d, for the kit's own code and tests only: no student
// header includes this one (it pulls in c10d's headers). Tests use wrap_process_group to run
// ranks as threads over a HashStore; dist/rendezvous.cpp uses it after its rendezvous.
#pragma once

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "dtlab/core/libtorch_compat.h"
#include "dtlab/dist/detail/heartbeat.h"
#include "dtlab/dist/group.h"

namespace dtlab::dist {

using detail::Heartbeat;
// The c10d object a Group drives: Gloo's or NCCL's process group (Note [LibTorch versions]).
using C10dBackend = compat::CollectiveBackend;

struct Group::State {
  c10::intrusive_ptr<C10dBackend> pg;
  int rank = 0, size = 1;
  std::chrono::milliseconds timeout{0};
  std::string backend;
  torch::Device device = torch::kCPU;  // where the backend takes tensors (Group::device())
  int local_rank = 0, local_world_size = 1;
  int ranks_on_this_machine = 1;
  CommLog log;
  int64_t sequence = 0;  // operations issued by this rank: named in every error message
  int64_t collectives = 0;  // of them, the collectives: the number the desync check compares
  bool check_collectives = false;  // Note [Desync detection] in dist/group.h
  // Note [Who stopped] (dist/detail/heartbeat.h): the rendezvous store and this rank's heartbeat;
  // null for groups made without a rendezvous (tests' thread ranks), whose errors then say less.
  c10::intrusive_ptr<c10d::Store> store;
  std::unique_ptr<Heartbeat> heartbeat;
  // A sub-group (dist/subgroup.h): its name and the world rank of each of its ranks, so that
  // its errors name the rank as the launcher numbered it. Empty for a world group.
  std::string name;
  std::vector<int> world_ranks;
  // Makes the c10d group of a sub-group of this one: (store prefix, rank in it, its size), over
  // the same store and network device. Set by init_process_group and by the tests' thread
  // ranks; null where a group cannot have sub-groups.
  std::function<c10::intrusive_ptr<C10dBackend>(const std::string&, int, int)> make_backend;
  // Note [A dropped PendingWork] (dist/group.cpp): the first operation whose PendingWork was
  // destroyed before wait(), said by this rank's next operation. The mutex: DDP's works are made
  // on the autograd thread.
  std::mutex dropped_mutex;
  std::string dropped;
};

// The first line of an exception's message, without c10's backtrace: how dist's errors quote
// what c10d or Gloo said.
std::string what_of(const std::exception& e);
// "1.5 s": a timeout as the errors print it.
std::string seconds_text(std::chrono::milliseconds ms);

// A Group over an existing c10d process group. local_rank / local_world_size: this rank's place
// among the ranks of its host.
std::unique_ptr<Group> wrap_process_group(c10::intrusive_ptr<C10dBackend> pg, int rank,
                                          int size, std::chrono::milliseconds timeout,
                                          std::string backend, int local_rank = 0,
                                          int local_world_size = 1, int ranks_on_this_machine = 1);

// "rank 3" for a world group; "rank 3 (rank 1 of stage 1's data-parallel group)" for a sub-group.
std::string rank_name(const Group::State& state);

// Note [Who stopped]: gives the group the rendezvous store and this rank's heartbeat, so that its
// failed operations name the rank that stopped.
void attach_heartbeat(Group& group, c10::intrusive_ptr<c10d::Store> store, std::unique_ptr<Heartbeat> heartbeat);

}  // namespace dtlab::dist
