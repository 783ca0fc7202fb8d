#include "bootstrap.h"

#include <errno.h>
#include <poll.h>
#include <stddef.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "kiln/runtime/check.h"

namespace kiln {
namespace comm {
namespace internal {
namespace {

constexpr uint64_t kHelloMagic = 0x6b696c6e2d697063ull;  // "kiln-ipc"
// How often a rank retries connecting while rank 0 is not listening yet.
constexpr int kConnectRetryMs = 10;

enum Welcome : uint32_t { kWelcome = 0, kOtherSize = 1, kTakenRank = 2, kBadRank = 3 };

struct Hello {
  uint64_t magic;
  uint32_t rank;
  uint32_t size;
};

struct Reply {
  uint64_t magic;
  uint32_t status;
  uint32_t size;
};

uint64_t now_ms() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000u + static_cast<uint64_t>(ts.tv_nsec) / 1000000u;
}

int remaining_ms(uint64_t deadline) {
  const uint64_t now = now_ms();
  return now >= deadline ? 0 : static_cast<int>(deadline - now);
}

// The socket address of a rendezvous: a path, or '@' + an abstract name.
bool make_address(const std::string& rendezvous, sockaddr_un* out_address, socklen_t* out_length) {
  memset(out_address, 0, sizeof(*out_address));
  out_address->sun_family = AF_UNIX;
  const bool abstract = !rendezvous.empty() && rendezvous[0] == '@';
  const size_t length = rendezvous.size();
  if (length == 0 || length >= sizeof(out_address->sun_path)) return false;
  memcpy(out_address->sun_path, rendezvous.data(), length);
  if (abstract) out_address->sun_path[0] = '\0';
  *out_length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + length + (abstract ? 0 : 1));
  return true;
}

// Waits until `fd` is ready for `events`; false at the deadline or on an error.
bool wait_ready(int fd, short events, uint64_t deadline) {
  for (;;) {
    pollfd p = {fd, events, 0};
    const int n = poll(&p, 1, remaining_ms(deadline));
    if (n > 0) return true;
    if (n == 0) return false;
    if (errno != EINTR) return false;
  }
}

// kOk; kPeerFailed when the peer closed its end (*out_closed) or the deadline passed.
Error send_all(int fd, const void* data, size_t bytes, uint64_t deadline) {
  const uint8_t* p = static_cast<const uint8_t*>(data);
  while (bytes > 0) {
    if (!wait_ready(fd, POLLOUT, deadline)) return Error::kPeerFailed;
    const ssize_t n = send(fd, p, bytes, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return Error::kPeerFailed;
    p += n;
    bytes -= static_cast<size_t>(n);
  }
  return Error::kOk;
}

Error recv_all(int fd, void* data, size_t bytes, uint64_t deadline, bool* out_closed) {
  uint8_t* p = static_cast<uint8_t*>(data);
  *out_closed = false;
  while (bytes > 0) {
    if (!wait_ready(fd, POLLIN, deadline)) return Error::kPeerFailed;
    const ssize_t n = recv(fd, p, bytes, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      *out_closed = true;
      return Error::kPeerFailed;
    }
    p += n;
    bytes -= static_cast<size_t>(n);
  }
  return Error::kOk;
}

// One byte carrying `count` descriptors (SCM_RIGHTS).
Error send_fds(int fd, const int* fds, uint32_t count, uint64_t deadline) {
  char byte = 'f';
  iovec iov = {&byte, 1};
  std::vector<char> control(CMSG_SPACE(sizeof(int) * count));
  msghdr message;
  memset(&message, 0, sizeof(message));
  message.msg_iov = &iov;
  message.msg_iovlen = 1;
  if (count > 0) {
    message.msg_control = control.data();
    message.msg_controllen = control.size();
    cmsghdr* header = CMSG_FIRSTHDR(&message);
    header->cmsg_level = SOL_SOCKET;
    header->cmsg_type = SCM_RIGHTS;
    header->cmsg_len = CMSG_LEN(sizeof(int) * count);
    memcpy(CMSG_DATA(header), fds, sizeof(int) * count);
  }
  for (;;) {
    if (!wait_ready(fd, POLLOUT, deadline)) return Error::kPeerFailed;
    const ssize_t n = sendmsg(fd, &message, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    return n == 1 ? Error::kOk : Error::kPeerFailed;
  }
}

Error recv_fds(int fd, int* out_fds, uint32_t count, uint64_t deadline, bool* out_closed) {
  char byte = 0;
  iovec iov = {&byte, 1};
  std::vector<char> control(CMSG_SPACE(sizeof(int) * count));
  msghdr message;
  memset(&message, 0, sizeof(message));
  message.msg_iov = &iov;
  message.msg_iovlen = 1;
  message.msg_control = control.data();
  message.msg_controllen = control.size();
  *out_closed = false;
  for (;;) {
    if (!wait_ready(fd, POLLIN, deadline)) return Error::kPeerFailed;
    const ssize_t n = recvmsg(fd, &message, MSG_CMSG_CLOEXEC);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      *out_closed = true;
      return Error::kPeerFailed;
    }
    break;
  }
  uint32_t received = 0;
  for (cmsghdr* header = CMSG_FIRSTHDR(&message); header != nullptr; header = CMSG_NXTHDR(&message, header)) {
    if (header->cmsg_level != SOL_SOCKET || header->cmsg_type != SCM_RIGHTS) continue;
    const uint32_t n = static_cast<uint32_t>((header->cmsg_len - CMSG_LEN(0)) / sizeof(int));
    for (uint32_t i = 0; i < n; ++i) {
      int received_fd;
      memcpy(&received_fd, CMSG_DATA(header) + i * sizeof(int), sizeof(int));
      if (received < count) {
        out_fds[received++] = received_fd;
      } else {
        close(received_fd);
      }
    }
  }
  if (received == count && (message.msg_flags & MSG_CTRUNC) == 0) return Error::kOk;
  for (uint32_t i = 0; i < received; ++i) close(out_fds[i]);
  return Error::kPeerFailed;
}

// Binds and listens at `address`; a socket file left by a job whose rank 0
// died (nobody accepts on it) is removed first.
Error listen_at(const std::string& rendezvous, const sockaddr_un& address, socklen_t length, uint32_t backlog,
                int* out_fd) {
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  KILN_CHECK_OR_RETURN(fd >= 0, Error::kPeerFailed, "cuda-ipc: rank 0: socket(): %s", strerror(errno));
  int status = bind(fd, reinterpret_cast<const sockaddr*>(&address), length);
  if (status != 0 && errno == EADDRINUSE && rendezvous[0] != '@') {
    const int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    const bool stale =
        probe >= 0 && connect(probe, reinterpret_cast<const sockaddr*>(&address), length) != 0 && errno == ECONNREFUSED;
    if (probe >= 0) close(probe);
    if (stale && unlink(rendezvous.c_str()) == 0) {
      KILN_LOG(INFO, "cuda-ipc: rank 0: removed a stale rendezvous socket %s (a job that ended before its ranks met)",
               rendezvous.c_str());
      status = bind(fd, reinterpret_cast<const sockaddr*>(&address), length);
    } else {
      errno = EADDRINUSE;
    }
  }
  if (status != 0 || listen(fd, static_cast<int>(backlog)) != 0) {
    const int error = errno;
    close(fd);
    KILN_RETURN_ERROR(
        Error::kPeerFailed, "cuda-ipc: rank 0: cannot listen at rendezvous %s: %s%s", rendezvous.c_str(),
        strerror(error),
        error == EADDRINUSE ? " (another job's rank 0 is there: give each job its own KILN_RENDEZVOUS)" : "");
  }
  *out_fd = fd;
  return Error::kOk;
}

}  // namespace

void Bootstrap::close_all() {
  for (int& fd : sockets_) {
    if (fd >= 0) close(fd);
    fd = -1;
  }
}

Error Bootstrap::open(uint32_t rank, uint32_t size, const std::string& rendezvous, uint32_t timeout_ms) {
  rank_ = rank;
  size_ = size;
  sockets_.assign(rank == 0 ? size : 1, -1);
  if (size == 1) return Error::kOk;
  sockaddr_un address;
  socklen_t length = 0;
  KILN_CHECK_OR_RETURN(make_address(rendezvous, &address, &length), Error::kInvalidArgument,
                       "cuda-ipc: rank %u: rendezvous '%s' is empty or longer than %zu bytes", rank, rendezvous.c_str(),
                       sizeof(address.sun_path) - 1);
  const uint64_t deadline = now_ms() + timeout_ms;
  if (rank != 0) {
    // Connect, retrying while rank 0 is not listening yet.
    int fd = -1;
    for (;;) {
      fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
      KILN_CHECK_OR_RETURN(fd >= 0, Error::kPeerFailed, "cuda-ipc: rank %u: socket(): %s", rank, strerror(errno));
      if (connect(fd, reinterpret_cast<const sockaddr*>(&address), length) == 0) break;
      const int error = errno;
      close(fd);
      KILN_CHECK_OR_RETURN(error == ENOENT || error == ECONNREFUSED || error == EAGAIN, Error::kPeerFailed,
                           "cuda-ipc: rank %u: connecting to rendezvous %s: %s", rank, rendezvous.c_str(),
                           strerror(error));
      KILN_CHECK_OR_RETURN(remaining_ms(deadline) > 0, Error::kPeerFailed,
                           "cuda-ipc: rank %u: rank 0 did not open rendezvous %s within %u ms "
                           "(KILN_RENDEZVOUS_TIMEOUT_MS): it did not start, or it uses another name",
                           rank, rendezvous.c_str(), timeout_ms);
      usleep(kConnectRetryMs * 1000);
    }
    sockets_[0] = fd;
    const Hello hello = {kHelloMagic, rank, size};
    Reply reply = {0, 0, 0};
    bool closed = false;
    if (send_all(fd, &hello, sizeof(hello), deadline) != Error::kOk ||
        recv_all(fd, &reply, sizeof(reply), deadline, &closed) != Error::kOk || reply.magic != kHelloMagic) {
      close_all();
      KILN_RETURN_ERROR(Error::kPeerFailed, "cuda-ipc: rank %u: the rank 0 at rendezvous %s did not welcome it%s", rank,
                        rendezvous.c_str(), closed ? " (it closed the connection)" : " in time");
    }
    if (reply.status != kWelcome) {
      close_all();
      KILN_CHECK_OR_RETURN(reply.status != kOtherSize, Error::kPeerFailed,
                           "cuda-ipc: rank %u: world size mismatch: rank 0 at %s has a world of %u ranks, this rank "
                           "%u (KILN_WORLD_SIZE)",
                           rank, rendezvous.c_str(), reply.size, size);
      KILN_RETURN_ERROR(Error::kPeerFailed, "cuda-ipc: rank %u: rank 0 at %s refused it: %s", rank, rendezvous.c_str(),
                        reply.status == kTakenRank ? "another process already is this rank" : "no such rank");
    }
    return Error::kOk;
  }

  int listener = -1;
  KILN_RETURN_IF_ERROR(listen_at(rendezvous, address, length, size, &listener));
  uint32_t arrived = 1;
  while (arrived < size) {
    if (!wait_ready(listener, POLLIN, deadline)) break;
    const int fd = accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    Hello hello = {0, 0, 0};
    bool closed = false;
    if (recv_all(fd, &hello, sizeof(hello), deadline, &closed) != Error::kOk || hello.magic != kHelloMagic) {
      close(fd);  // not one of ours, or gone
      continue;
    }
    Reply reply = {kHelloMagic, kWelcome, size};
    if (hello.size != size) {
      reply.status = kOtherSize;
      KILN_LOG(ERROR, "cuda-ipc: rank 0: world size mismatch: rank %u says the world has %u ranks, rank 0 has %u",
               hello.rank, hello.size, size);
    } else if (hello.rank == 0 || hello.rank >= size) {
      reply.status = kBadRank;
    } else if (sockets_[hello.rank] >= 0) {
      reply.status = kTakenRank;
      KILN_LOG(ERROR, "cuda-ipc: rank 0: two processes claim rank %u", hello.rank);
    }
    const bool sent = send_all(fd, &reply, sizeof(reply), deadline) == Error::kOk;
    if (reply.status != kWelcome || !sent) {
      close(fd);
      if (reply.status == kOtherSize || reply.status == kTakenRank) {
        close(listener);
        close_all();
        return Error::kPeerFailed;
      }
      continue;
    }
    sockets_[hello.rank] = fd;
    ++arrived;
  }
  close(listener);
  // Every rank is connected (or none will be): nobody needs the name now.
  if (rendezvous[0] != '@') unlink(rendezvous.c_str());
  if (arrived == size) return Error::kOk;
  std::string missing;
  for (uint32_t r = 1; r < size; ++r) {
    if (sockets_[r] < 0) missing += (missing.empty() ? "" : ", ") + std::to_string(r);
  }
  close_all();
  KILN_RETURN_ERROR(Error::kPeerFailed,
                    "cuda-ipc: rank 0: rank(s) %s of %u did not arrive at rendezvous %s within %u ms "
                    "(KILN_RENDEZVOUS_TIMEOUT_MS)",
                    missing.c_str(), size, rendezvous.c_str(), timeout_ms);
}

Error Bootstrap::all_gather(const void* mine, size_t bytes, void* out_all, uint32_t timeout_ms, const char* what) {
  uint8_t* all = static_cast<uint8_t*>(out_all);
  memcpy(all + rank_ * bytes, mine, bytes);
  if (size_ == 1) return Error::kOk;
  const uint64_t deadline = now_ms() + timeout_ms;
  bool closed = false;
  if (rank_ != 0) {
    if (sockets_[0] < 0 || send_all(sockets_[0], mine, bytes, deadline) != Error::kOk ||
        recv_all(sockets_[0], all, bytes * size_, deadline, &closed) != Error::kOk) {
      close_all();
      KILN_RETURN_ERROR(Error::kPeerFailed, "cuda-ipc: rank %u: %s: rank 0 %s", rank_, what,
                        closed || sockets_[0] < 0 ? "closed its connection (a rank exited or failed)"
                                                  : "did not answer in time (KILN_COLLECTIVE_TIMEOUT_MS)");
    }
    return Error::kOk;
  }
  for (uint32_t r = 1; r < size_; ++r) {
    if (sockets_[r] < 0 || recv_all(sockets_[r], all + r * bytes, bytes, deadline, &closed) != Error::kOk) {
      close_all();
      KILN_RETURN_ERROR(Error::kPeerFailed, "cuda-ipc: rank 0: %s: rank %u %s", what, r,
                        closed || sockets_[r] < 0 ? "closed its connection (it exited?)"
                                                  : "did not send in time (KILN_COLLECTIVE_TIMEOUT_MS)");
    }
  }
  for (uint32_t r = 1; r < size_; ++r) {
    if (send_all(sockets_[r], all, bytes * size_, deadline) != Error::kOk) {
      close_all();
      KILN_RETURN_ERROR(Error::kPeerFailed, "cuda-ipc: rank 0: %s: cannot send to rank %u (it exited?)", what, r);
    }
  }
  return Error::kOk;
}

Error Bootstrap::all_gather_fds(int mine, int* out_fds, uint32_t timeout_ms, const char* what) {
  for (uint32_t r = 0; r < size_; ++r) out_fds[r] = -1;
  if (size_ == 1) return Error::kOk;
  const uint64_t deadline = now_ms() + timeout_ms;
  bool closed = false;
  if (rank_ != 0) {
    // Rank 0 sends the others' descriptors in rank order, this rank's left out.
    std::vector<int> others(size_ - 1, -1);
    if (sockets_[0] < 0 || send_fds(sockets_[0], &mine, 1, deadline) != Error::kOk ||
        recv_fds(sockets_[0], others.data(), size_ - 1, deadline, &closed) != Error::kOk) {
      close_all();
      KILN_RETURN_ERROR(Error::kPeerFailed, "cuda-ipc: rank %u: %s: rank 0 %s", rank_, what,
                        closed || sockets_[0] < 0 ? "closed its connection (a rank exited or failed)"
                                                  : "did not pass the descriptors in time");
    }
    for (uint32_t r = 0, i = 0; r < size_; ++r) {
      if (r != rank_) out_fds[r] = others[i++];
    }
    return Error::kOk;
  }
  std::vector<int> all(size_, mine);
  auto close_received = [&] {
    for (uint32_t r = 1; r < size_; ++r) {
      if (all[r] >= 0 && all[r] != mine) close(all[r]);
    }
  };
  for (uint32_t r = 1; r < size_; ++r) {
    all[r] = -1;
    if (sockets_[r] < 0 || recv_fds(sockets_[r], &all[r], 1, deadline, &closed) != Error::kOk) {
      all[r] = -1;
      close_received();
      close_all();
      KILN_RETURN_ERROR(
          Error::kPeerFailed, "cuda-ipc: rank 0: %s: rank %u %s", what, r,
          closed || sockets_[r] < 0 ? "closed its connection (it exited?)" : "did not send its descriptor in time");
    }
  }
  std::vector<int> others;
  for (uint32_t to = 1; to < size_; ++to) {
    others.clear();
    for (uint32_t r = 0; r < size_; ++r) {
      if (r != to) others.push_back(all[r]);
    }
    if (send_fds(sockets_[to], others.data(), static_cast<uint32_t>(others.size()), deadline) != Error::kOk) {
      close_received();
      close_all();
      KILN_RETURN_ERROR(Error::kPeerFailed, "cuda-ipc: rank 0: %s: cannot pass descriptors to rank %u (it exited?)",
                        what, to);
    }
  }
  for (uint32_t r = 1; r < size_; ++r) out_fds[r] = all[r];
  return Error::kOk;
}

}  // namespace internal
}  // namespace comm
}  // namespace kiln
