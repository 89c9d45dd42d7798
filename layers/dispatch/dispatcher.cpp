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

Dispatcher::Dispatcher() {
  // The schemas are the operators' public contract; the binding layer parses them once.
  ops_[static_cast<size_t>(OpId::kMatmul)] =
      OperatorEntry(OpId::kMatmul, "matmul", "matmul(Tensor self, Tensor other) -> Tensor");
  ops_[static_cast<size_t>(OpId::kLinear)] = OperatorEntry(
      OpId::kLinear, "linear", "linear(Tensor input, Tensor weight, Tensor? bias=None) -> Tensor");
  ops_[static_cast<size_t>(OpId::kConv2d)] = OperatorEntry(
      OpId::kConv2d, "conv2d",
      "conv2d(Tensor input, Tensor weight, Tensor? bias=None, int stride=1, int padding=0) -> Tensor");
  ops_[static_cast<size_t>(OpId::kRelu)] = OperatorEntry(OpId::kRelu, "relu", "relu(Tensor self) -> Tensor");
  ops_[static_cast<size_t>(OpId::kAdd)] = OperatorEntry(
      OpId::kAdd, "add", "add(Tensor self, Tensor other, *, float alpha=1) -> Tensor");
}

Dispatcher& Dispatcher::instance() {
  static Dispatcher* dispatcher = [] {
    auto* d = new Dispatcher();  // never destroyed: kernels may run during static destruction
    register_autograd_kernels(*d);
    register_backends(*d);
    return d;
  }();
  return *dispatcher;
}

namespace ops {

// Each entry point opens the zone that the first key's row owns: computing the key set is dispatch work.
Tensor matmul(const Tensor& self, const Tensor& other) {
  STRATA_ZONE(zone, Layer::kDispatch, "keys");
  return Dispatcher::instance().call<OpId::kMatmul>(zone, compute_dispatch_key_set(self, other), self, other);
}

Tensor linear(const Tensor& input, const Tensor& weight, const Tensor& bias) {
  STRATA_ZONE(zone, Layer::kDispatch, "keys");
  return Dispatcher::instance().call<OpId::kLinear>(zone, compute_dispatch_key_set(input, weight, bias), input,
                                                    weight, bias);
}

Tensor conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias, int64_t stride,
              int64_t padding) {
  STRATA_ZONE(zone, Layer::kDispatch, "keys");
  return Dispatcher::instance().call<OpId::kConv2d>(zone, compute_dispatch_key_set(input, weight, bias), input,
                                                    weight, bias, stride, padding);
}

Tensor relu(const Tensor& self) {
  STRATA_ZONE(zone, Layer::kDispatch, "keys");
  return Dispatcher::instance().call<OpId::kRelu>(zone, compute_dispatch_key_set(self), self);
}

Tensor add(const Tensor& self, const Tensor& other, double alpha) {
  STRATA_ZONE(zone, Layer::kDispatch, "keys");
  return Dispatcher::instance().call<OpId::kAdd>(zone, compute_dispatch_key_set(self, other), self, other,
                                                 alpha);
}

}  // namespace ops
}  // namespace strata
