// A rank program for grader_launch_test's fork cases (Note [Ranks forked from one started
// program], dtlab/tooling/fork_server.h): it links the fork server and says, as its one line,
// which process started its program (the pid its earliest constructor saw: the server's when
// it was forked, its own when exec'd), who it is, and its group and parent.
//   fork_probe RANK CODES SECONDS: prints, sleeps the RANK-th of the comma-separated SECONDS, exits
//   with the RANK-th of CODES (every rank of a run takes the same words).
// With DTLAB_FORK_PROBE_SERVER_FAILS=1 a program started as a server exits at once (status 3).
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

pid_t started_as = 0;

// Priority 100: before the fork server's constructor (101), so it runs in the server itself.
__attribute__((constructor(100))) void note_start() {
  started_as = ::getpid();
  const char* fails = std::getenv("DTLAB_FORK_PROBE_SERVER_FAILS");
  if (fails && std::strcmp(fails, "1") == 0 && std::getenv("DTLAB_FORK_SERVER")) ::_exit(3);
}

// The n-th entry of a comma-separated list.
const char* nth(const char* list, int n) {
  while (n-- > 0 && list) {
    list = std::strchr(list, ',');
    if (list) ++list;
  }
  return list ? list : "0";
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: fork_probe RANK CODES SECONDS\n");
    return 2;
  }
  std::printf("rank %s started_as %d pid %d pgid %d ppid %d server_env %s\n", argv[1], static_cast<int>(started_as),
              static_cast<int>(::getpid()), static_cast<int>(::getpgid(0)), static_cast<int>(::getppid()),
              std::getenv("DTLAB_FORK_SERVER") ? "set" : "unset");
  std::fflush(stdout);
  ::usleep(static_cast<useconds_t>(std::atof(nth(argv[3], std::atoi(argv[1]))) * 1e6));
  return std::atoi(nth(argv[2], std::atoi(argv[1])));
}
