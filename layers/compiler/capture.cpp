// Capture: the Capture dispatch key's kernel records every operator call into a Graph.
//
// Note [Capture is a dispatch key]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// PyTorch's tracers (make_fx's ProxyTorchDispatchMode, the Python key) sit in the dispatcher: a call
// reaches the tracing key, is recorded, and redispatches below it. strata does the same with
// DispatchKey::kCapture, the highest key, rather than generalising the plan recorder, because the two
// record different things: the plan recorder sits below every wrapper key and records resolved backend
// kernel calls as closures (what replay re-runs), while a compiler needs the program as the caller wrote
// it (matmul, then relu, before Autocast's casts or Autograd's nodes) with every argument visible as data
// (shapes, dtypes, alpha) so that it can be lowered. A wrapper key gives exactly that with the one
// mechanism every wrapper key uses: record, then redispatch with the key removed (c10's
// redispatch(ks.remove(self))). While the call runs below, Capture is also excluded on this thread, so the
// calls a kernel makes of its own (Autocast's to_copy) stay inside the recorded node instead of becoming
// nodes of their own.
//
// Calls run for real while captured, not symbolically: the capture then yields the eager result too (what
// the compiled result is checked against), every kernel validates its arguments as it always does, and
// no fake-tensor machinery is needed (PyTorch needs FakeTensor because it traces models too large to run
// twice; strata's programs are not). The cost is one eager forward, reported as the capture phase.
//
// The Capture kernels are registered here, once per process on the first capture, for every operator in
// ops::AllOps: one explicit list walked in one place (the other keys' list is layers/ops/register_kernels.cpp).
#include <map>
#include <mutex>
#include <type_traits>

#include "layers/compiler/compiler.h"
#include "layers/dispatch/dispatch.h"
#include "layers/ops/operators.h"
#include "lib/host_clock.h"

namespace strata::compiler {
namespace {

// Builds the graph while a capture is active on this thread.
class GraphBuilder {
 public:
  explicit GraphBuilder(const std::vector<Tensor>& inputs) {
    for (size_t i = 0; i < inputs.size(); ++i) {
      size_t first = i;
      for (size_t j = 0; j < i && first == i; ++j) first = inputs[j].data_ptr() == inputs[i].data_ptr() ? j : i;
      Node n;
      n.kind = NodeKind::kInput;
      n.meta = meta_of(inputs[i]);
      n.input_index = i;
      graph_.nodes.push_back(std::move(n));
      graph_.inputs.push_back(graph_.nodes.size() - 1);
      graph_.same_as.push_back(first);
      if (first == i) add_alive(graph_.inputs.back(), inputs[i]);  // an alias keeps the first's node
    }
  }

  // The node a tensor argument comes from: an input, an earlier call's output, or else a constant
  // (a parameter the function closed over), added on first sight.
  size_t value_of(const Tensor& t) {
    auto found = by_address_.find(t.data_ptr());
    if (found != by_address_.end() && graph_.nodes[found->second].meta == meta_of(t)) return found->second;
    Node n;
    n.kind = NodeKind::kConstant;
    n.meta = meta_of(t);
    n.constant = t;
    return add(std::move(n), t);
  }

  void record(const char* op, std::vector<binding::IValue> boxed, const Tensor& out) {
    Node n;
    n.op = op;
    for (binding::IValue& v : boxed) {
      if (v.is_tensor()) {
        n.args.push_back({value_of(v.tensor()), {}});
      } else {
        n.args.push_back({std::nullopt, std::move(v)});
      }
    }
    n.meta = meta_of(out);
    const size_t id = add(std::move(n), out);
    for (const Arg& a : graph_.nodes[id].args) {
      if (!a.value) continue;
      std::vector<size_t>& users = graph_.nodes[*a.value].users;
      if (users.empty() || users.back() != id) users.push_back(id);  // add(x, x): one user
    }
  }

  Graph take(const std::vector<Tensor>& outputs) {
    for (const Tensor& t : outputs) {
      if (!t.defined()) throw UsageError("capture: the function returned an undefined tensor");
      graph_.outputs.push_back(value_of(t));
    }
    return std::move(graph_);
  }

 private:
  static ValueMeta meta_of(const Tensor& t) { return {t.sizes(), t.dtype(), t.device()}; }

  // Every tensor the graph names is kept alive until capture ends, so that no address is reused by a
  // later tensor and mistaken for the node that had it.
  size_t add(Node n, const Tensor& t) {
    graph_.nodes.push_back(std::move(n));
    add_alive(graph_.nodes.size() - 1, t);
    return graph_.nodes.size() - 1;
  }
  void add_alive(size_t id, const Tensor& t) {
    if (!t.defined()) return;
    by_address_[t.data_ptr()] = id;
    alive_.push_back(t);
  }

  Graph graph_;
  std::map<const void*, size_t> by_address_;
  std::vector<Tensor> alive_;
};

thread_local GraphBuilder* t_builder = nullptr;

// An argument as the graph keeps it: a tensor as a tensor (an absent Tensor? as None), the rest boxed.
template <typename T>
binding::IValue box(const T& v) {
  using U = std::remove_cvref_t<T>;
  if constexpr (std::is_same_v<U, Tensor>) {
    return v.defined() ? binding::IValue(v) : binding::IValue();
  } else if constexpr (std::is_same_v<U, std::optional<DType>>) {
    return v ? binding::IValue(*v) : binding::IValue();
  } else {
    return binding::IValue(v);
  }
}

// A binary op's two tensors of different shapes (the rest of the arguments are scalars).
template <typename... Args>
void refuse_broadcast(const char* op, const Tensor& self, const Tensor& other, const Args&...) {
  if (self.sizes() == other.sizes() && self.dtype() == other.dtype()) return;
  const char* what = self.sizes() == other.sizes() ? "promotes its operands' dtypes" : "broadcasts";
  throw UsageError(std::string("capture: ") + op + " of " + self.str() + " and " + other.str() + " " + what +
                   "; the compiled path does not capture broadcasting or type promotion yet (docs/broadcasting.md)");
}

template <typename Op, typename Signature = typename Op::Signature>
struct CaptureKernel;
template <typename Op, typename... Args>
struct CaptureKernel<Op, Tensor(Args...)> {
  static Tensor fn(DispatchKeySet ks, Args... args) {
    // A view shares its input's memory, and the graph tells values apart by address and shape: a
    // transpose of a square matrix would be taken for the matrix. Refused until the graph models views.
    if constexpr (requires { Op::kStridedInputs; } && !std::is_same_v<Op, ops::Contiguous>) {
      throw UsageError(std::string("capture: ") + Op::kName +
                       " is a view (it shares its input's memory); the compiled path does not capture views yet "
                       "(docs/views.md)");
    }
    // An in-place op's output is its input's memory, written: the graph, which tells values apart by
    // address, would take the written tensor for the one read. Refused until the graph models mutation
    // (Note [In-place operators] in layers/ops/operators.h).
    if constexpr (ops::kInPlace<Op>) {
      throw UsageError(std::string("capture: ") + Op::kName +
                       " writes its input in place; the compiled path does not capture in-place ops yet "
                       "(docs/autograd.md)");
    }
    // The fused loops index every operand by the output's flat index, in one dtype: a broadcast operand
    // (Note [Broadcasting] in lib/op_shapes.h) would be read past its end, a promoted one (Note [Type
    // promotion]) as the wrong type. Refused until lowering reads strides and casts.
    if constexpr (std::is_same_v<Op, ops::Add> || std::is_same_v<Op, ops::Sub> || std::is_same_v<Op, ops::Mul> ||
                  std::is_same_v<Op, ops::Div>) {
      refuse_broadcast(Op::kName, args...);
    }
    Tensor out;
    {
      ExcludeKeyGuard exclude(DispatchKey::kCapture);  // the calls below are part of this node
      out = ops::redispatch<Op>(ks.remove(DispatchKey::kCapture), args...);
    }
    if (t_builder != nullptr) t_builder->record(Op::kName, {box(args)...}, out);
    return out;
  }
};

void register_capture_kernels() {
  static std::once_flag once;
  std::call_once(once, [] {
    ops::AllOps::for_each([](auto op) {
      using Op = decltype(op);
      Dispatcher::instance().entry(ops::op_index<Op>()).set_kernel(
          DispatchKey::kCapture, reinterpret_cast<void*>(&CaptureKernel<Op>::fn),
          "layers/compiler/capture.cpp (records the call into the graph, redispatches)");
    });
  });
}

class ActiveBuilder {
 public:
  explicit ActiveBuilder(GraphBuilder* b) { t_builder = b; }
  ~ActiveBuilder() { t_builder = nullptr; }
  ActiveBuilder(const ActiveBuilder&) = delete;
  ActiveBuilder& operator=(const ActiveBuilder&) = delete;
};

}  // namespace

Captured capture(const Function& fn, const std::vector<Tensor>& inputs) {
  if (t_builder != nullptr) throw UsageError("capture: already capturing on this thread (captures do not nest)");
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].defined()) throw UsageError("capture: input " + std::to_string(i) + " is an undefined tensor");
  }
  register_capture_kernels();
  host_clock::calibrate();  // once per process, and not inside the capture's time
  const int64_t t0 = host_clock::now_ns();
  GraphBuilder builder(inputs);
  std::vector<Tensor> outputs;
  {
    ActiveBuilder active(&builder);
    IncludeKeyGuard include(DispatchKey::kCapture);
    outputs = fn(inputs);
  }
  Captured c{builder.take(outputs), std::move(outputs), 0};
  c.capture_ns = double(host_clock::now_ns() - t0);
  return c;
}

}  // namespace strata::compiler
