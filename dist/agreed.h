// Agreement on errors across ranks: every rank runs a block and, when it threw
// on any rank, every rank throws the same message, so no rank is left waiting
// in the next collective. The set-up of a data-parallel run is a chain of such
// blocks (apps/train/).
#pragma once
#include <exception>
#include <string>

#include "core/user_message.h"
#include "dist/communicator.h"

namespace ember::dist {

// Runs f on every rank and agrees on the outcome: when f threw on any rank,
// every rank throws the lowest failing rank's message. The message is
// user_message's (as main's for one process; `command` names the ember
// command in it). One process: f's own exception, unchanged.
template <class F>
void agreed(const Communicator& comm, F&& f, const std::string& command = "train") {
  if (comm.world_size() == 1) {
    f();
    return;
  }
  std::string error;
  try {
    f();
  } catch (const std::exception& e) {
    error = user_message(e, command);
  }
  comm.raise_if_any_failed(error);
}

}  // namespace ember::dist
