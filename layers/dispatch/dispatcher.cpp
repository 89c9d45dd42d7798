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
    case DispatchKey::kCapture: return "Capture";
    case DispatchKey::kCount: break;
  }
  return "?";
}

OperatorEntry::OperatorEntry(const char* name, const char* schema) : name_(name), schema_(schema) {
  for (int k = 0; k < kNumDispatchKeys; ++k)
    inner_names_[static_cast<size_t>(k)] = std::string(name) + ":" + dispatch_key_name(static_cast<DispatchKey>(k));
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
  if (table_[static_cast<size_t>(key)] != nullptr || fallthrough_.has(key)) {
    throw Error(std::string("register_kernel: ") + name_ + " already has a " + dispatch_key_name(key) +
                " kernel, registered by " + debug_[static_cast<size_t>(key)]);
  }
  table_[static_cast<size_t>(key)] = fn;
  debug_[static_cast<size_t>(key)] = std::move(debug);
}

void OperatorEntry::set_fallthrough(DispatchKey key, std::string debug) {
  if (key == DispatchKey::kUndefined || key == DispatchKey::kCount || key == DispatchKey::kCPU ||
      key == DispatchKey::kCUDA) {
    throw Error(std::string("set_fallthrough: ") + name_ + ": only a wrapper key can fall through, not " +
                dispatch_key_name(key));
  }
  if (table_[static_cast<size_t>(key)] != nullptr || fallthrough_.has(key)) {
    throw Error(std::string("set_fallthrough: ") + name_ + " already has a kernel or a fallthrough for " +
                dispatch_key_name(key) + ", registered by " + debug_[static_cast<size_t>(key)]);
  }
  fallthrough_ = fallthrough_.add(key);
  debug_[static_cast<size_t>(key)] = std::move(debug);
}

void OperatorEntry::clear_kernel(DispatchKey key) {
  table_[static_cast<size_t>(key)] = nullptr;
  fallthrough_ = fallthrough_.remove(key);
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
