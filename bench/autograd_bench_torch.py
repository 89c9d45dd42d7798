"""PyTorch's side of bench/autograd_bench: the same graphs as strata's (a chain of N adds of a constant, whose
AddBackward0 passes the gradient through with no op; a chain of N relus, whose ReluBackward0 calls
threshold_backward), on tiny tensors, backward timed with torch.autograd.backward. Prints one JSON line:
nanoseconds per node, the median over the repetitions. Run by autograd_bench (Debian's python3-torch)."""
import json
import statistics
import sys
import time

import torch


def per_node_ns(make, nodes, repeat):
    samples = []
    for _ in range(repeat):
        root = make(nodes)
        t0 = time.perf_counter_ns()
        torch.autograd.backward(root)
        samples.append((time.perf_counter_ns() - t0) / (nodes + 2))  # + SumBackward0 + AccumulateGrad
    return statistics.median(samples)


def main():
    nodes, repeat = int(sys.argv[1]), int(sys.argv[2])
    torch.set_num_threads(1)
    c = torch.randn(4)

    def add_chain(n):
        h = torch.randn(4, requires_grad=True)
        for _ in range(n):
            h = h + c
        return h.sum()

    def relu_chain(n):
        h = torch.randn(4, requires_grad=True)
        for _ in range(n):
            h = torch.relu(h)
        return h.sum()

    for make in (add_chain, relu_chain):  # warm up the engine's thread and allocator
        per_node_ns(make, nodes, 3)
    print(json.dumps({"torch": torch.__version__, "add_chain_ns_per_node": per_node_ns(add_chain, nodes, repeat),
                      "relu_chain_ns_per_node": per_node_ns(relu_chain, nodes, repeat)}))


if __name__ == "__main__":
    main()
