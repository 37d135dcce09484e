#include "dtlab/dist/netdev.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "dtlab/core/error.h"
#include "test_util.h"

// Everything in a namespace named after the file (no anonymous namespace): the unit suites share
// one binary, compiled in groups of files (Note [Unity builds] in cmake/Dtlab.cmake), so helpers
// must not collide, and a TEST_F class must not derive from a type of an anonymous namespace.
namespace netdev_test {

// Closes a descriptor on scope exit.
struct Fd {
  int fd = -1;
  explicit Fd(int f) : fd(f) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

// Sends `bytes` bytes from a client to a server over a fresh TCP connection on 127.0.0.1 and
// returns how many the server received (all of them unless something failed).
size_t send_over_loopback_tcp(size_t bytes) {
  Fd listener(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (listener.fd < 0) throw std::runtime_error(std::string("socket: ") + std::strerror(errno));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;  // any free port
  socklen_t len = sizeof addr;
  if (::bind(listener.fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::listen(listener.fd, 1) != 0 ||
      ::getsockname(listener.fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    throw std::runtime_error(std::string("listen on 127.0.0.1: ") + std::strerror(errno));
  }
  Fd client(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (client.fd < 0 ||
      ::connect(client.fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    throw std::runtime_error(std::string("connect to 127.0.0.1: ") + std::strerror(errno));
  }
  Fd server(::accept(listener.fd, nullptr, nullptr));
  if (server.fd < 0) throw std::runtime_error(std::string("accept: ") + std::strerror(errno));

  size_t received = 0;
  std::thread reader([&] {
    std::vector<char> buf(64 * 1024);
    for (;;) {
      const ssize_t n = ::recv(server.fd, buf.data(), buf.size(), 0);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;  // the client closed its end (or an error)
      received += static_cast<size_t>(n);
    }
  });
  const std::vector<char> chunk(64 * 1024, 'x');
  size_t left = bytes;
  while (left > 0) {
    const ssize_t n = ::send(client.fd, chunk.data(), std::min(left, chunk.size()), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    left -= static_cast<size_t>(n);
  }
  ::shutdown(client.fd, SHUT_WR);  // the reader sees end of stream once everything arrived
  reader.join();
  return received;
}

TEST(ReadCounters, LoopbackGrowsByAtLeastTheBytesSentOverIt) {
  // Every payload byte crosses lo once; lo counts it once as sent and once as received, and
  // headers only add to that. Other processes on the machine can only make the counters grow,
  // so the payload size is a lower bound for both directions.
  constexpr size_t kBytes = 4 * 1024 * 1024;
  const dtlab::dist::InterfaceCounters before = dtlab::dist::read_counters("lo");
  ASSERT_EQ(send_over_loopback_tcp(kBytes), kBytes);
  const dtlab::dist::InterfaceCounters after = dtlab::dist::read_counters("lo");
  EXPECT_GE(after.tx_bytes - before.tx_bytes, kBytes);
  EXPECT_GE(after.rx_bytes - before.rx_bytes, kBytes);
  // At least one packet each way carried data (plus the handshake).
  EXPECT_GT(after.tx_packets, before.tx_packets);
  EXPECT_GT(after.rx_packets, before.rx_packets);
}

TEST(ReadCounters, UnknownInterfaceNamesItAndListsTheExistingOnes) {
  EXPECT_THROW_WITH(dtlab::dist::read_counters("dtlab-nosuch0"), dtlab::Error, "dtlab-nosuch0");
  EXPECT_THROW_WITH(dtlab::dist::read_counters("dtlab-nosuch0"), dtlab::Error, "rx_bytes");
  // Loopback always exists, so it is among the interfaces listed.
  EXPECT_THROW_WITH(dtlab::dist::read_counters("dtlab-nosuch0"), dtlab::Error, "lo");
  EXPECT_THROW_WITH(dtlab::dist::read_counters("dtlab-nosuch0"), dtlab::Error,
                    "interfaces here: ");
}

TEST(ReadCounters, PathLikeNamesAreRejected) {
  EXPECT_THROW_WITH(dtlab::dist::read_counters("../lo"), dtlab::Error, "../lo");
  EXPECT_THROW_WITH(dtlab::dist::read_counters(""), dtlab::Error, "interface");
}

TEST(InterfaceForAddress, LoopbackAddressIsOnLo) {
  EXPECT_EQ(dtlab::dist::interface_for_address("127.0.0.1"), "lo");
}

TEST(InterfaceForAddress, AddressNoInterfaceHoldsIsAnError) {
  // 203.0.113.0/24 is TEST-NET-3 (RFC 5737), for documentation only.
  EXPECT_THROW_WITH(dtlab::dist::interface_for_address("203.0.113.254"), dtlab::Error,
                    "203.0.113.254");
  EXPECT_THROW_WITH(dtlab::dist::interface_for_address("203.0.113.254"), dtlab::Error,
                    "127.0.0.1 on lo");
  EXPECT_THROW_WITH(dtlab::dist::interface_for_address("not-an-address"), dtlab::Error,
                    "not-an-address");
}

TEST(LocalAddressTowards, LoopbackIsReachedFromLoopback) {
  EXPECT_EQ(dtlab::dist::local_address_towards("127.0.0.1", 1), "127.0.0.1");
  // Any 127/8 destination goes over lo; the source is 127.0.0.1 or the destination itself.
  EXPECT_EQ(dtlab::dist::interface_for_address(
                dtlab::dist::local_address_towards("127.0.0.1", 29500)),
            "lo");
}

TEST(LocalAddressTowards, UnresolvableHostIsAnError) {
  // A 64-character label cannot be encoded in a DNS query (labels are at most 63 octets), so
  // the resolver fails without sending anything, and /etc/hosts has no such name.
  const std::string host = std::string(64, 'x') + ".invalid";
  EXPECT_THROW_WITH(dtlab::dist::local_address_towards(host, 29500), dtlab::Error,
                    "cannot resolve master " + host);
}

TEST(LocalAddressTowards, BadPortIsAnError) {
  EXPECT_THROW_WITH(dtlab::dist::local_address_towards("127.0.0.1", 70000), dtlab::Error,
                    "70000");
}

}  // namespace netdev_test
