// Network interfaces as a distributed run sees them: which interface carries the traffic to the
// master, and how many bytes have crossed it. Lets a benchmark report what went over the wire
// (bytes sent per step, achieved bandwidth) next to what the algorithm says should have.
// Linux only; needs no privileges.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

namespace dtlab::dist {

// Cumulative counters of one interface since it came up, as the kernel keeps them.
// On loopback ("lo") every byte sent is also received on the same interface, so a byte crossing
// a local connection is counted once in tx_bytes and once in rx_bytes; on a real NIC (or a veth
// of a network namespace) tx_bytes is what left this host and rx_bytes what arrived.
// Byte counts include the link, IP and TCP/UDP headers, so they are at least the payload sent.
struct InterfaceCounters {
  uint64_t rx_bytes = 0;
  uint64_t tx_bytes = 0;
  uint64_t rx_packets = 0;
  uint64_t tx_packets = 0;
};

// Reads the interface's rx/tx bytes and packets from /proc/self/net/dev: the counters of the
// calling process's network namespace (Note [Counters of the process's namespace] in netdev.cpp).
// Throws dtlab::Error naming the interface and the file when a file is missing or unreadable;
// the message lists the interfaces that do exist (e.g. "... (interfaces here: eth0, lo)").
InterfaceCounters read_counters(const std::string& interface);

// The name of the local interface that holds the IPv4 address `ipv4` (dotted quad, e.g.
// "127.0.0.1" -> "lo"), looked up with getifaddrs. Throws dtlab::Error when `ipv4` is not a
// valid dotted-quad address or when no local interface holds it (the message lists the local
// IPv4 addresses).
std::string interface_for_address(const std::string& ipv4);

// The local IPv4 address (dotted quad) the kernel would use as source address to reach
// host:port, found by connecting a UDP socket and reading its name back (getsockname): this
// consults the routing table but sends no packet. `host` is a dotted quad or a host name,
// resolved with getaddrinfo to its first IPv4 address. Throws dtlab::Error with a one-line
// message when the host cannot be resolved ("cannot resolve master NAME: ...") or there is no
// route to it ("cannot reach master 10.1.2.3: Network is unreachable").
std::string local_address_towards(const std::string& host, int port);

// The interface a rank's traffic to the master leaves by: `interface` when given (--interface),
// else the one holding the local address that routes to master_addr. Throws as the two above.
std::string interface_towards(const std::string& master_addr, int master_port,
                              const std::optional<std::string>& interface = std::nullopt);

// Whether something accepts TCP connections on host:port within `limit`: tries to connect every
// 100 ms (each attempt bounded, so an unroutable host costs `limit`, not the kernel's SYN
// timeout) and closes what it opened. False when `host` cannot be resolved or nothing accepted.
bool accepts_connections(const std::string& host, int port, std::chrono::milliseconds limit);

}  // namespace dtlab::dist
