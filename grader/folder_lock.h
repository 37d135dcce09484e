// An exclusive lock on DIR/.grader.lock for as long as the object lives: two gradings writing
// the same runs/ would mix their files, and two submission builds in one build/ would race. The
// kernel drops the lock when the grader ends, however it ends.
#pragma once

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "dtlab/core/error.h"

namespace dtlab::grader {

class FolderLock {
 public:
  // Waits up to wait_seconds for another grader to let go (0: not at all), then throws
  // dtlab::Error saying who holds what.
  explicit FolderLock(const std::filesystem::path& dir, double wait_seconds = 0) {
    const std::filesystem::path path = dir / ".grader.lock";
    fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ < 0) throw Error("cannot open " + path.string());
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(wait_seconds);
    while (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
      if (std::chrono::steady_clock::now() >= deadline) {
        ::close(fd_);
        throw Error("another grader is using " + dir.string() + " (" + path.string() +
                    " is locked): wait for it to finish, or give --results another folder");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
  }
  ~FolderLock() { ::close(fd_); }
  FolderLock(const FolderLock&) = delete;
  FolderLock& operator=(const FolderLock&) = delete;

 private:
  int fd_ = -1;
};

}  // namespace dtlab::grader
