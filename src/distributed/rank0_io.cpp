#include "mpiddp/distributed/rank0_io.hpp"

#include <algorithm>
#include <cstdint>
#include <exception>
#include <string>

namespace mpiddp::distributed {

void on_rank0(distributed::Communicator& comm, const std::function<void()>& work) {
  // status[0]: the exit code (0: success); status[1]: the length of the message that follows.
  uint64_t status[2] = {0, 0};
  std::string message;
  if (comm.rank() == 0) {
    try {
      work();
    } catch (const Error& e) {
      message = e.what();
      status[0] = static_cast<uint64_t>(e.code());
    } catch (const std::exception& e) {  // out of memory, say: the others must not wait on
      message = std::string("rank 0: ") + e.what();
      status[0] = static_cast<uint64_t>(kExitFailure);
    }
    status[1] = message.size();
  }
  comm.broadcast(status, sizeof status, 0);
  if (status[0] == 0) return;
  message.resize(status[1]);
  comm.broadcast(message.data(), message.size(), 0);
  throw Error(static_cast<ExitCode>(status[0]), message, Scope::kEveryRank);
}

void on_every_rank(distributed::Communicator& comm, const std::function<void()>& work) {
  uint64_t code = 0;
  std::string message;
  try {
    work();
  } catch (const Error& e) {
    code = static_cast<uint64_t>(e.code());
    message = e.what();
  } catch (const std::exception& e) {  // out of memory, say: the others must not wait on
    code = static_cast<uint64_t>(kExitFailure);
    message = "rank " + std::to_string(comm.rank()) + ": " + e.what();
  }
  const std::vector<uint64_t> codes = comm.allgather(code);
  const auto failed = std::find_if(codes.begin(), codes.end(), [](uint64_t c) { return c != 0; });
  if (failed == codes.end()) return;
  const std::vector<std::string> messages = comm.allgather_string(message);
  throw Error(static_cast<ExitCode>(*failed), messages[static_cast<size_t>(failed - codes.begin())],
              Scope::kEveryRank);
}

std::vector<char> bytes_from_rank0(distributed::Communicator& comm,
                                   const std::function<std::vector<char>()>& produce) {
  std::vector<char> bytes;
  on_rank0(comm, [&] { bytes = produce(); });
  uint64_t size = bytes.size();
  comm.broadcast(&size, sizeof size, 0);
  bytes.resize(size);
  comm.broadcast(bytes.data(), bytes.size(), 0);
  return bytes;
}

}  // namespace mpiddp::distributed
