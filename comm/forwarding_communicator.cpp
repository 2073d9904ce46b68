// ForwardingCommunicator's spec and split: the parts of the forwarding base that are not one-line
// pass-throughs (those stay inline in the header).
#include "comm/forwarding_communicator.h"

#include <utility>

namespace dts {

namespace {
// Checked before the base stores `inner`, so the spec below can read its backend name.
std::unique_ptr<Communicator> require_inner(std::unique_ptr<Communicator> inner, std::string_view name) {
  if (!inner) throw Error(Error::Kind::invalid_argument, std::string(name) + ": inner communicator is null");
  return inner;
}
}  // namespace

ForwardingCommunicator::ForwardingCommunicator(std::unique_ptr<Communicator> inner, std::string_view name,
                                               std::string_view leading_args)
    : inner_(require_inner(std::move(inner), name)) {
  spec_ = std::string(name) + "(" + std::string(leading_args) + (leading_args.empty() ? "" : ",") +
          std::string(inner_->backend()) + ")";
}

std::unique_ptr<Communicator> ForwardingCommunicator::split(int color, int key) {
  auto group = inner_->split(color, key);
  if (!group) return nullptr;  // this rank is in no group
  return wrap(std::move(group));
}

}  // namespace dts
