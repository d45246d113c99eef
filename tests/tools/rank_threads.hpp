// The members of an in-process group, one thread each: body(rank) for every rank, all joined,
// then the lowest rank's exception (if any) rethrown on the caller's thread, where Catch sees it.
#pragma once

#include <exception>
#include <thread>
#include <vector>

namespace mactor::test {

template <class Body>
void on_rank_threads(int ranks, Body body) {
  std::vector<std::exception_ptr> errors(static_cast<std::size_t>(ranks));
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r)
    threads.emplace_back([&, r] {
      try {
        body(r);
      } catch (...) {
        errors[static_cast<std::size_t>(r)] = std::current_exception();
      }
    });
  for (auto& t : threads) t.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
}

}  // namespace mactor::test
