// Note [Ranks forked from one started program]: what the launcher (grader/fork_ranks.h) and a
// rank program's fork server (common/drivers/fork_server.cpp) agree on.
//
// A program that links LibTorch spends about 0.6 s of CPU before its first line (the dynamic
// loader binds some 290 shared libraries, LibTorch's dispatcher registers every operator), and a
// ctest pass starts some 1,800 ranks: more than half of the pass's CPU went to starting. So the
// launcher starts a run's program once, as a fork server: it loads and initialises everything up
// to the executable's own constructors, then forks one process per rank on request, each with its
// own arguments, output and process group, re-parented to the launcher (a child subreaper) so the
// launcher waits for, times and kills them as it did processes it started itself. What a rank
// runs (the constructors of the executable, main) starts after the fork, so every rank still
// begins where an exec'd one begins, in a process of its own.
//
// The wire: a SOCK_SEQPACKET socket pair. The server announces itself with "ready"; a request is
// the rank's argv joined by NULs, with the rank's log as an SCM_RIGHTS descriptor; the answer is
// the rank's pid in decimal, or "error: ..." in words. The launcher closing its end ends the
// server. The launcher forks only a program whose bytes hold kForkServerMarker (one that links
// the server), locally, and not when told to exec every rank (DTLAB_EXEC_RANKS=1).
#pragma once

#include <sys/socket.h>
#include <sys/uio.h>

namespace dtlab::fork_server {

// The environment variable that makes a program a fork server: "<marker>:<descriptor>".
inline constexpr const char* kEnvironment = "DTLAB_FORK_SERVER";
// Also how the launcher knows that a program links the server (it looks for these bytes).
inline constexpr const char* kMarker = "dtlab-fork-server-1";
// The most bytes of one request (a rank's arguments).
inline constexpr int kMaxRequestBytes = 1 << 16;

// Room for the one descriptor a request carries.
struct OneDescriptor {
  alignas(cmsghdr) char bytes[CMSG_SPACE(sizeof(int))] = {};
};

// A message of one buffer with room for one descriptor, for sendmsg and recvmsg.
inline msghdr message_of(iovec* io, OneDescriptor* control) {
  msghdr message{};
  message.msg_iov = io;
  message.msg_iovlen = 1;
  message.msg_control = control->bytes;
  message.msg_controllen = sizeof control->bytes;
  return message;
}

}  // namespace dtlab::fork_server
