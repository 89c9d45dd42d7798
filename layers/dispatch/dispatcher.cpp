#include <string>

#include "layers/dispatch/dispatch.h"

namespace strata {

const char* dispatch_key_name(DispatchKey key) {
  switch (key) {
    case DispatchKey::kUndefined: return "Undefined";
    case DispatchKey::kCPU: return "CPU";
    case DispatchKey::kCUDA: return "CUDA";
    case DispatchKey::kAutograd: return "Autograd";
    case DispatchKey::kAutocast: return "Autocast";
    case DispatchKey::kCount: break;
  }
  return "?";
}

std::vector<DispatchKey> OperatorEntry::keys_with_kernels() const {
  std::vector<DispatchKey> keys;
  for (int k = kNumDispatchKeys - 1; k > 0; --k) {  // priority order, highest first
    if (table_[static_cast<size_t>(k)] != nullptr) keys.push_back(static_cast<DispatchKey>(k));
  }
  return keys;
}

void OperatorEntry::set_kernel(DispatchKey key, void* fn, std::string debug) {
  if (key == DispatchKey::kUndefined || key == DispatchKey::kCount) {
    throw Error(std::string("register_kernel: ") + name_ + ": cannot register a kernel for key " +
                dispatch_key_name(key));
  }
  if (table_[static_cast<size_t>(key)] != nullptr) {
    throw Error(std::string("register_kernel: ") + name_ + " already has a " + dispatch_key_name(key) +
                " kernel, registered by " + debug_[static_cast<size_t>(key)]);
  }
  table_[static_cast<size_t>(key)] = fn;
  debug_[static_cast<size_t>(key)] = std::move(debug);
}

void OperatorEntry::clear_kernel(DispatchKey key) {
  table_[static_cast<size_t>(key)] = nullptr;
  debug_[static_cast<size_t>(key)].clear();
}

RegistrationHandle::~RegistrationHandle() {
  if (entry_ != nullptr) entry_->clear_kernel(key_);
}

void OperatorEntry::throw_missing_kernel(DispatchKey key, DispatchKeySet ks) const {
  std::string have;
  for (DispatchKey k : keys_with_kernels()) {
    if (!have.empty()) have += ", ";
    have += dispatch_key_name(k);
  }
  std::string set;
  for (int k = kNumDispatchKeys - 1; k > 0; --k) {
    if (ks.has(static_cast<DispatchKey>(k))) {
      if (!set.empty()) set += " > ";
      set += dispatch_key_name(static_cast<DispatchKey>(k));
    }
  }
  throw UnavailableError(std::string(name_) + " has no kernel for dispatch key " + dispatch_key_name(key) +
                         " (key set: " + (set.empty() ? "empty" : set) + "); kernels exist for: " +
                         (have.empty() ? "none" : have));
}

}  // namespace strata
