// The Autograd key: record the backward node each op would need (saving its inputs, as PyTorch's
// MmBackward0 and friends do), redispatch below Autograd, and attach the node to the output. strata does
// not run backward passes; what it measures is the forward-time cost of recording, which is what a
// `requires_grad=True` forward pays in PyTorch.
#include <memory>

#include "layers/dispatch/dispatch.h"

namespace strata {
namespace {

template <size_t N>
class SavingNode : public GradNode {
 public:
  template <typename... Ts>
  SavingNode(const char* name, const Ts&... saved) : name_(name), saved_{saved...} {}
  const char* name() const override { return name_; }
  size_t num_saved() const override {
    size_t n = 0;
    for (const Tensor& t : saved_) n += t.defined() ? 1 : 0;
    return n;
  }

 private:
  const char* name_;
  std::array<Tensor, N> saved_;
};

Tensor attach(Tensor out, std::shared_ptr<GradNode> node) {
  out.set_requires_grad(true);
  out.set_grad_fn(std::move(node));
  return out;
}

constexpr DispatchKey kSelf = DispatchKey::kAutograd;

Tensor matmul_autograd(DispatchKeySet ks, const Tensor& self, const Tensor& other) {
  auto node = std::make_shared<SavingNode<2>>("MmBackward", self, other);
  return attach(Dispatcher::instance().redispatch<OpId::kMatmul>(ks.remove(kSelf), self, other), std::move(node));
}

Tensor linear_autograd(DispatchKeySet ks, const Tensor& input, const Tensor& weight, const Tensor& bias) {
  auto node = std::make_shared<SavingNode<2>>("AddmmBackward", input, weight);
  return attach(Dispatcher::instance().redispatch<OpId::kLinear>(ks.remove(kSelf), input, weight, bias),
                std::move(node));
}

Tensor conv2d_autograd(DispatchKeySet ks, const Tensor& input, const Tensor& weight, const Tensor& bias,
                       int64_t stride, int64_t padding) {
  auto node = std::make_shared<SavingNode<2>>("ConvolutionBackward", input, weight);
  return attach(Dispatcher::instance().redispatch<OpId::kConv2d>(ks.remove(kSelf), input, weight, bias, stride,
                                                                 padding),
                std::move(node));
}

Tensor relu_autograd(DispatchKeySet ks, const Tensor& self) {
  Tensor out = Dispatcher::instance().redispatch<OpId::kRelu>(ks.remove(kSelf), self);
  // ReluBackward saves its result (the mask is where the output is positive).
  auto node = std::make_shared<SavingNode<1>>("ReluBackward", out);
  return attach(std::move(out), std::move(node));
}

Tensor add_autograd(DispatchKeySet ks, const Tensor& self, const Tensor& other, double alpha) {
  auto node = std::make_shared<SavingNode<1>>("AddBackward", Tensor());  // add saves nothing
  return attach(Dispatcher::instance().redispatch<OpId::kAdd>(ks.remove(kSelf), self, other, alpha),
                std::move(node));
}

}  // namespace

void register_autograd_kernels(Dispatcher& d) {
  const char* where = "layers/dispatch/autograd.cpp";
  d.register_kernel<OpId::kMatmul>(kSelf, matmul_autograd, std::string(where) + " (records MmBackward)");
  d.register_kernel<OpId::kLinear>(kSelf, linear_autograd, std::string(where) + " (records AddmmBackward)");
  d.register_kernel<OpId::kConv2d>(kSelf, conv2d_autograd,
                                   std::string(where) + " (records ConvolutionBackward)");
  d.register_kernel<OpId::kRelu>(kSelf, relu_autograd, std::string(where) + " (records ReluBackward)");
  d.register_kernel<OpId::kAdd>(kSelf, add_autograd, std::string(where) + " (records AddBackward)");
}

}  // namespace strata
