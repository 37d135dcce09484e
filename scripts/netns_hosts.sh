#!/usr/bin/env bash
# Makes N test "hosts" on one Linux machine, to rehearse multi-machine runs (torchrun-style
# rendezvous, c10d/Gloo over TCP, bandwidth-bound collectives) without a cluster.
#
# Each host is a network namespace <prefix>-h<i> with loopback up and one interface, eth0, holding
# <subnet>.(10+i)/24. The eth0s are veth pairs whose other ends (<prefix>-v<i>) hang on a bridge
# <prefix>-br0 in the root namespace; the bridge holds <subnet>.1/24 so the root namespace can
# reach the hosts too. The hosts get no default route: they can reach each other and the bridge
# address, nothing else. With --rate, each host's link is shaped with a token bucket filter
# (tc tbf) in both directions (egress of eth0 inside the namespace, and egress of its peer
# <prefix>-v<i> towards the host), so each host behaves like a full-duplex NIC of that speed.
#
# Commands:
#   up N [--prefix dtlab] [--rate RATE] [--burst BYTES] [--subnet 10.213.0]
#       create the hosts; prints one line per host: "<prefix>-h0 10.213.0.10 eth0"
#   down [--prefix dtlab]
#       remove everything `up` made (stops processes left inside the namespaces, deletes the
#       namespaces, veths and bridge); idempotent, succeeds when nothing is there
#   exec HOST [--prefix dtlab] -- CMD...
#       run CMD inside HOST (a namespace name like dtlab-h1, or just its index 1)
#   run N [--prefix dtlab] [--rate RATE] [--subnet S] [--logs DIR] [--timeout SECONDS]
#         [--ranks_per_host K] -- CMD...
#       up N; run CMD once per host (K times per host with --ranks_per_host: ranks hK .. hK+K-1
#       on host h, which talk to each other over the host's own loopback, unshaped, and to other
#       hosts over its shaped eth0: a machine of K GPUs on a NIC), in parallel, inside each
#       namespace, with {rank} {world} {master} {addr} {host} {local_rank} replaced in every word
#       (world = N x K, master = address of host 0, addr = this host's address, host = its
#       namespace name, local_rank = the rank's place on its host); wait (at most --timeout seconds, default
#       600, then every rank is killed); print each rank's exit status; always tear down, also
#       on failure or Ctrl-C. Output of rank i goes to DIR/rank<i>.log (DIR defaults to a new
#       temporary folder). Exit status: 0 when all ranks exit 0, 124 on timeout, 1 otherwise.
#
# Example:
#   sudo scripts/netns_hosts.sh run 2 --rate 1gbit -- sh -c 'echo rank {rank} of {world}; ip -4 addr show eth0'
#
# RATE takes tc's units: bit kbit mbit gbit tbit (bits/s) or bps kbps mbps gbps tbps (bytes/s).
# The default tbf burst is 1 ms of traffic at RATE, at least 64 KiB (one full TSO segment); the
# queue holds at most 10 ms of traffic. Measured with one TCP stream: --rate 1gbit gives about
# 0.94 Gbit/s of payload; two hosts sending to a third share its 1 Gbit/s.
#
# Ranks run with the caller's environment and working folder. `ip netns exec` mounts the
# namespace's own /sys, so inside a rank /sys/class/net lists just lo and eth0 and their
# counters (what dtlab::dist::read_counters("eth0") reads) are that host's traffic alone.
#
# Needs root (namespaces, links, qdiscs) and iproute2 (`ip`, and `tc` for --rate); nothing else.
# It only creates, touches and removes names starting with the prefix: namespaces <prefix>-h<i>,
# links <prefix>-v<i> and <prefix>-br0, and the processes running inside its own namespaces.
# Interface names are at most 15 characters, so the prefix is at most 11.
set -euo pipefail

readonly PROG=netns_hosts
readonly IFNAMSIZ_MAX=15

die() {
  echo "$PROG: $*" >&2
  exit 1
}

usage() {
  cat >&2 <<'EOF'
usage: netns_hosts.sh up N [--prefix dtlab] [--rate RATE] [--burst BYTES] [--subnet 10.213.0]
       netns_hosts.sh down [--prefix dtlab]
       netns_hosts.sh exec HOST [--prefix dtlab] -- CMD...
       netns_hosts.sh run N [--prefix dtlab] [--rate RATE] [--burst BYTES] [--subnet 10.213.0]
                            [--logs DIR] [--timeout SECONDS] [--ranks_per_host K] -- CMD...
   placeholders in run's CMD: {rank} {world} {master} {addr} {host} {local_rank}
EOF
  exit 2
}

# ---- options ------------------------------------------------------------------------------

prefix=dtlab
rate=
burst=
subnet=10.213.0
logs=
timeout=600
ranks_per_host=1
positional=()
cmd=()

parse_args() {
  while (($# > 0)); do
    case "$1" in
      --prefix | --rate | --burst | --subnet | --logs | --timeout | --ranks_per_host)
        (($# >= 2)) || die "$1 needs a value"
        case "$1" in
          --ranks_per_host) ranks_per_host=$2 ;;
          --prefix) prefix=$2 ;;
          --rate) rate=$2 ;;
          --burst) burst=$2 ;;
          --subnet) subnet=$2 ;;
          --logs) logs=$2 ;;
          --timeout) timeout=$2 ;;
        esac
        shift 2
        ;;
      --prefix=* | --rate=* | --burst=* | --subnet=* | --logs=* | --timeout=* | --ranks_per_host=*)
        local name=${1%%=*} value=${1#*=}
        parse_args "$name" "$value"
        shift
        ;;
      --)
        shift
        cmd=("$@")
        return
        ;;
      -h | --help) usage ;;
      -*) die "unknown option $1 (see --help)" ;;
      *)
        positional+=("$1")
        shift
        ;;
    esac
  done
}

validate_prefix() {
  [[ $prefix =~ ^[A-Za-z0-9][A-Za-z0-9_.]*(-[A-Za-z0-9_.]+)*$ ]] ||
    die "bad --prefix '$prefix' (letters, digits, '_', '.', inner '-')"
  ((${#prefix} + 4 <= IFNAMSIZ_MAX)) ||
    die "--prefix '$prefix' is too long: interface names like $prefix-br0 must fit in $IFNAMSIZ_MAX characters"
}

validate_count() {
  local n=$1
  if ! [[ $n =~ ^[1-9][0-9]*$ ]] || ((n < 1 || n > 240)); then
    die "number of hosts must be 1..240, got '$n'"
  fi
  local last="$prefix-v$((n - 1))"
  ((${#last} <= IFNAMSIZ_MAX)) ||
    die "--prefix '$prefix' is too long for $n hosts: '$last' exceeds $IFNAMSIZ_MAX characters"
}

validate_subnet() {
  [[ $subnet =~ ^([0-9]{1,3})\.([0-9]{1,3})\.([0-9]{1,3})$ ]] ||
    die "bad --subnet '$subnet' (three octets, like 10.213.0)"
  local o
  for o in "${BASH_REMATCH[@]:1}"; do ((10#$o <= 255)) || die "bad --subnet '$subnet'"; done
}

need_root_and_ip() {
  ((EUID == 0)) || die "needs root (network namespaces, links and qdiscs): run with sudo"
  command -v ip >/dev/null 2>&1 || die "'ip' not found: install iproute2 (apt-get install iproute2)"
}

# Bits per second for a tc rate like 1gbit, 100mbit, 125mbps, 1000000.
rate_bits_per_second() {
  local r=${1,,}
  [[ $r =~ ^([0-9]+(\.[0-9]+)?)([a-z]*)$ ]] || return 1
  local num=${BASH_REMATCH[1]} unit=${BASH_REMATCH[3]} mult
  case "$unit" in
    "" | bit) mult=1 ;;
    kbit) mult=1e3 ;;
    mbit) mult=1e6 ;;
    gbit) mult=1e9 ;;
    tbit) mult=1e12 ;;
    bps) mult=8 ;;
    kbps) mult=8e3 ;;
    mbps) mult=8e6 ;;
    gbps) mult=8e9 ;;
    tbps) mult=8e12 ;;
    *) return 1 ;;
  esac
  awk -v n="$num" -v m="$mult" 'BEGIN { printf "%.0f\n", n * m }'
}

# ---- names --------------------------------------------------------------------------------

ns_name() { echo "$prefix-h$1"; }
veth_name() { echo "$prefix-v$1"; }
bridge_name() { echo "$prefix-br0"; }
host_addr() { echo "$subnet.$((10 + $1))"; }

# Lines joined by spaces.
one_line() { tr '\n' ' ' <<<"$1" | sed 's/ *$//'; }

# Namespaces and links that belong to this prefix, one per line.
our_namespaces() {
  ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^${prefix//./\\.}-h[0-9]+$" || true
}
our_links() {
  ip -o link show 2>/dev/null | awk -F': ' '{print $2}' | sed 's/@.*//' |
    grep -E "^${prefix//./\\.}-(v[0-9]+|br0)$" || true
}

# Serialises up/down of one prefix between concurrent invocations (flock is optional).
lock_fd=
take_lock() {
  command -v flock >/dev/null 2>&1 || return 0
  local dir=/run/lock
  [[ -d $dir ]] || dir=/tmp
  exec {lock_fd}>"$dir/dtlab-netns-hosts-$prefix.lock"
  flock -w 60 "$lock_fd" || die "another netns_hosts.sh is working on prefix '$prefix'"
}
release_lock() {
  if [[ -n $lock_fd ]]; then
    exec {lock_fd}>&-
    lock_fd=
  fi
}

# ---- down ---------------------------------------------------------------------------------

# Removes everything of this prefix. Never fails: every step ignores errors.
teardown() {
  set +e
  local ns pids link
  # Processes still inside our namespaces keep them (and their veths) alive: stop them.
  for ns in $(our_namespaces); do
    pids=$(ip netns pids "$ns" 2>/dev/null)
    # shellcheck disable=SC2086  # one pid per word
    [[ -n $pids ]] && kill -TERM $pids 2>/dev/null
  done
  for ns in $(our_namespaces); do
    local tries=20
    while [[ -n $(ip netns pids "$ns" 2>/dev/null) ]] && ((tries-- > 0)); do sleep 0.1; done
    pids=$(ip netns pids "$ns" 2>/dev/null)
    # shellcheck disable=SC2086  # one pid per word
    [[ -n $pids ]] && kill -KILL $pids 2>/dev/null
  done
  for ns in $(our_namespaces); do ip netns delete "$ns" 2>/dev/null; done
  # Deleting a namespace destroys its eth0 and so the veth pair; remove whatever is left.
  for link in $(our_links); do ip link delete "$link" 2>/dev/null; done
  set -e
  return 0
}

cmd_down() {
  ((${#positional[@]} == 0)) || die "down takes no arguments besides --prefix"
  validate_prefix
  if [[ -z $(our_namespaces) && -z $(our_links) ]]; then
    return 0  # nothing there: done, also without root
  fi
  need_root_and_ip
  take_lock
  teardown
  release_lock
  local left
  left=$(our_namespaces; our_links)
  [[ -z $left ]] || die "could not remove: $(one_line "$left")"
}

# ---- up -----------------------------------------------------------------------------------

up_complete=false

create_hosts() {
  local n=$1
  need_root_and_ip
  validate_prefix
  validate_count "$n"
  validate_subnet
  local rate_bits=
  if [[ -n $rate ]]; then
    command -v tc >/dev/null 2>&1 || die "'tc' not found: install iproute2 (needed for --rate)"
    rate_bits=$(rate_bits_per_second "$rate") ||
      die "bad --rate '$rate' (like 1gbit, 100mbit, 125mbps)"
    ((rate_bits > 0)) || die "bad --rate '$rate'"
    if [[ -z $burst ]]; then
      burst=$((rate_bits / 8 / 1000))  # 1 ms at full rate
      ((burst >= 65536)) || burst=65536
    fi
  fi
  [[ -z $burst || $burst =~ ^[1-9][0-9]*$ ]] || die "bad --burst '$burst' (bytes)"

  take_lock
  local existing
  existing=$(our_namespaces; our_links)
  if [[ -n $existing ]]; then
    release_lock
    die "already exist: $(one_line "$existing") (remove them with: $0 down --prefix $prefix)"
  fi
  if ip -4 -o addr show 2>/dev/null | awk '{print $4}' | grep -q "^${subnet//./\\.}\."; then
    release_lock
    die "subnet $subnet.0/24 is already in use here (see ip -4 addr); choose another --subnet"
  fi

  # From here on, a failure removes whatever was made.
  trap 'if ! $up_complete; then teardown; fi' EXIT

  local br i ns veth
  br=$(bridge_name)
  ip link add name "$br" type bridge
  ip addr add "$subnet.1/24" dev "$br"
  echo 1 >"/proc/sys/net/ipv6/conf/$br/disable_ipv6" 2>/dev/null || true
  ip link set "$br" up
  for ((i = 0; i < n; i++)); do
    ns=$(ns_name "$i")
    veth=$(veth_name "$i")
    ip netns add "$ns"
    ip -n "$ns" link set lo up
    ip link add "$veth" type veth peer name eth0 netns "$ns"
    ip link set "$veth" master "$br"
    ip link set "$veth" up
    ip netns exec "$ns" sh -c 'echo 1 > /proc/sys/net/ipv6/conf/eth0/disable_ipv6' 2>/dev/null || true
    ip -n "$ns" addr add "$(host_addr "$i")/24" dev eth0
    ip -n "$ns" link set eth0 up
    if [[ -n $rate ]]; then
      tc -n "$ns" qdisc replace dev eth0 root tbf rate "$rate" burst "$burst" latency 10ms
      tc qdisc replace dev "$veth" root tbf rate "$rate" burst "$burst" latency 10ms
    fi
  done
  up_complete=true
  trap - EXIT
  release_lock
  for ((i = 0; i < n; i++)); do
    echo "$(ns_name "$i") $(host_addr "$i") eth0"
  done
}

cmd_up() {
  ((${#positional[@]} == 1)) || usage
  ((${#cmd[@]} == 0)) || die "up takes no command (did you mean run?)"
  create_hosts "${positional[0]}"
}

# ---- exec ---------------------------------------------------------------------------------

cmd_exec() {
  ((${#positional[@]} == 1)) || usage
  ((${#cmd[@]} > 0)) || die "exec needs a command after --"
  validate_prefix
  local host=${positional[0]}
  [[ $host =~ ^[0-9]+$ ]] && host=$(ns_name "$host")
  need_root_and_ip
  ip netns list | awk '{print $1}' | grep -qxF "$host" ||
    die "no namespace '$host' (make hosts with: $0 up N --prefix $prefix)"
  exec ip netns exec "$host" "${cmd[@]}"
}

# ---- run ----------------------------------------------------------------------------------

rank_pids=()
run_finished=false

kill_ranks() {
  local signal=$1 pid ns
  for pid in "${rank_pids[@]}"; do
    kill "-$signal" -- "-$pid" 2>/dev/null || kill "-$signal" "$pid" 2>/dev/null || true
  done
  # Anything the ranks started lives in our namespaces too.
  for ns in $(our_namespaces); do
    local pids
    pids=$(ip netns pids "$ns" 2>/dev/null || true)
    # shellcheck disable=SC2086  # one pid per word
    if [[ -n $pids ]]; then kill "-$signal" $pids 2>/dev/null || true; fi
  done
}

run_cleanup() {
  set +e
  if ! $run_finished && ((${#rank_pids[@]} > 0)); then
    kill_ranks TERM
    sleep 0.5
    kill_ranks KILL
  fi
  teardown
}

cmd_run() {
  ((${#positional[@]} == 1)) || usage
  ((${#cmd[@]} > 0)) || die "run needs a command template after --"
  if ! [[ $timeout =~ ^[0-9]+$ ]] || ((timeout == 0)); then
    die "bad --timeout '$timeout' (seconds)"
  fi
  if ! [[ $ranks_per_host =~ ^[1-9][0-9]*$ ]] || ((ranks_per_host > 64)); then
    die "bad --ranks_per_host '$ranks_per_host' (1..64)"
  fi
  local n=${positional[0]}
  local world=$((n * ranks_per_host))

  create_hosts "$n"
  trap run_cleanup EXIT
  trap 'echo "$PROG: interrupted, stopping ranks" >&2; exit 130' INT
  trap 'echo "$PROG: terminated, stopping ranks" >&2; exit 143' TERM
  if [[ -z $logs ]]; then
    logs=$(mktemp -d "${TMPDIR:-/tmp}/dtlab-netns-run.XXXXXX")
  else
    mkdir -p "$logs" || die "cannot create log folder $logs"
  fi
  echo "logs: $logs"

  local master i ns addr word
  master=$(host_addr 0)
  set -m  # each rank in its own process group, so a timeout can stop its children too
  for ((i = 0; i < world; i++)); do
    ns=$(ns_name "$((i / ranks_per_host))")
    addr=$(host_addr "$((i / ranks_per_host))")
    local argv=()
    for word in "${cmd[@]}"; do
      word=${word//"{rank}"/$i}
      word=${word//"{world}"/$world}
      word=${word//"{master}"/$master}
      word=${word//"{addr}"/$addr}
      word=${word//"{host}"/$ns}
      word=${word//"{local_rank}"/$((i % ranks_per_host))}
      argv+=("$word")
    done
    ip netns exec "$ns" "${argv[@]}" </dev/null >"$logs/rank$i.log" 2>&1 &
    rank_pids+=($!)
  done
  set +m

  # Wait for every rank, at most `timeout` seconds.
  local deadline=$((SECONDS + timeout)) running timed_out=false
  while :; do
    running=0
    for i in "${!rank_pids[@]}"; do
      kill -0 "${rank_pids[$i]}" 2>/dev/null && running=$((running + 1))
    done
    ((running == 0)) && break
    if ((SECONDS >= deadline)); then
      timed_out=true
      echo "$PROG: timeout after ${timeout}s, killing $running running rank(s)" >&2
      kill_ranks TERM
      sleep 1
      kill_ranks KILL
      break
    fi
    sleep 0.2
  done

  local status failed=0
  for i in "${!rank_pids[@]}"; do
    status=0
    wait "${rank_pids[$i]}" 2>/dev/null || status=$?
    if $timed_out && ((status > 128)); then
      echo "rank $i ($(ns_name "$((i / ranks_per_host))") $(host_addr "$((i / ranks_per_host))")): killed at timeout (exit $status)  log: $logs/rank$i.log"
    else
      echo "rank $i ($(ns_name "$((i / ranks_per_host))") $(host_addr "$((i / ranks_per_host))")): exit $status  log: $logs/rank$i.log"
    fi
    ((status == 0)) || failed=$((failed + 1))
  done
  run_finished=true
  if $timed_out; then exit 124; fi
  if ((failed > 0)); then
    echo "$PROG: $failed of $world rank(s) failed" >&2
    exit 1
  fi
}

# ---- main ---------------------------------------------------------------------------------

(($# >= 1)) || usage
command=$1
shift
parse_args "$@"
case "$command" in
  up) cmd_up ;;
  down) cmd_down ;;
  exec) cmd_exec ;;
  run) cmd_run ;;
  -h | --help | help) usage ;;
  *) die "unknown command '$command' (up, down, exec, run)" ;;
esac
