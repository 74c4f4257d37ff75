#pragma once
/// \file
/// An optional part of the Transport concept, for transports whose ranks are
/// cooperative fibers of one thread (the simulator): no background thread may
/// drive such a transport, but a second fiber of the same rank may. Such a
/// transport offers `cooperative_scheduler* t.cooperative()`, and a
/// communicator's asynchronous collectives then progress in a fiber of their
/// own beside the rank's (`comm/progress.hpp`), so they overlap the rank's
/// work in the transport's time instead of running only inside `wait`.
#include <functional>
#include <type_traits>
#include <utility>

namespace ddl {

/// Fibers of the calling rank, as a transport's scheduler runs them. Every
/// suspension may end early (a spurious resume): callers re-check what they
/// wait for.
class cooperative_scheduler {
 public:
  /// Starts `body` in a new fiber of the calling rank; it first runs when
  /// the caller suspends. It does not keep the run alive: a run ends when
  /// every rank's own fiber has ended. Returns the fiber's id.
  virtual int spawn(std::function<void()> body) = 0;
  /// The fiber running now.
  virtual int current() const = 0;
  /// Suspends the running fiber until `resume(id)` names it.
  virtual void suspend() = 0;
  /// Makes fiber `id` runnable (no effect on an ended fiber).
  virtual void resume(int id) = 0;
  /// Lets the other fibers run and the transport's clock move on (at least
  /// one event), then continues: what a polling loop calls between polls.
  virtual void yield() = 0;

 protected:
  ~cooperative_scheduler() = default;
};

namespace detail {
template <class T, class = void>
struct has_cooperative : std::false_type {};
template <class T>
struct has_cooperative<T, std::enable_if_t<std::is_convertible_v<decltype(std::declval<T&>().cooperative()),
                                                                 cooperative_scheduler*>>> : std::true_type {};
}  // namespace detail

/// The transport's fiber scheduler, or nullptr when it has none.
template <class T>
cooperative_scheduler* cooperative_of(T& t) {
  if constexpr (detail::has_cooperative<T>::value) return t.cooperative();
  else {
    (void)t;
    return nullptr;
  }
}

}  // namespace ddl
