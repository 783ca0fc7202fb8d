#include "ir/graph.h"

#include <algorithm>

#include "core/error.h"

namespace kiln::planner {

int Graph::add_constant(const std::string& stem, HostTensor data) {
  Value value;
  value.name = unique_name(stem);
  value.dtype = data.dtype;
  value.has_type = true;
  value.shape = data.shape;
  value.has_shape = true;
  value.constant = std::make_shared<HostTensor>(std::move(data));
  return add_value(std::move(value));
}

int Graph::add_value(Value value) {
  if (!value.name.empty() && by_name_.count(value.name) != 0) {
    fail("value name '", value.name, "' is defined twice");
  }
  const int id = static_cast<int>(values.size());
  if (!value.name.empty()) by_name_[value.name] = id;
  values.push_back(std::move(value));
  return id;
}

int Graph::find_value(const std::string& value_name) const {
  auto it = by_name_.find(value_name);
  return it == by_name_.end() ? -1 : it->second;
}

std::string Graph::unique_name(const std::string& stem) {
  for (;;) {
    std::string candidate = stem + "__" + std::to_string(next_unique_++);
    if (by_name_.count(candidate) == 0) return candidate;
  }
}

std::vector<std::vector<int>> Graph::consumers() const {
  std::vector<std::vector<int>> result(values.size());
  for (size_t n = 0; n < nodes.size(); ++n) {
    if (nodes[n].dead) continue;
    for (int v : nodes[n].inputs) {
      if (v < 0) continue;
      auto& list = result[static_cast<size_t>(v)];
      if (list.empty() || list.back() != static_cast<int>(n)) list.push_back(static_cast<int>(n));
    }
  }
  return result;
}

std::vector<int> Graph::topological_order() const {
  // Kahn's algorithm, taking ready nodes in their original order so a graph
  // that is already sorted keeps its order (and plans are deterministic).
  std::vector<int> pending(nodes.size(), 0);
  const auto readers = consumers();
  std::vector<int> order;
  std::vector<int> ready;
  for (size_t n = 0; n < nodes.size(); ++n) {
    if (nodes[n].dead) continue;
    for (int v : nodes[n].inputs) {
      if (v >= 0 && values[static_cast<size_t>(v)].producer >= 0) ++pending[n];
    }
    if (pending[n] == 0) ready.push_back(static_cast<int>(n));
  }
  std::make_heap(ready.begin(), ready.end(), std::greater<>());
  while (!ready.empty()) {
    std::pop_heap(ready.begin(), ready.end(), std::greater<>());
    const int n = ready.back();
    ready.pop_back();
    order.push_back(n);
    for (int v : nodes[static_cast<size_t>(n)].outputs) {
      if (v < 0) continue;
      for (int reader : readers[static_cast<size_t>(v)]) {
        // A node reading the same value twice was counted twice.
        for (int in : nodes[static_cast<size_t>(reader)].inputs) {
          if (in == v && --pending[static_cast<size_t>(reader)] == 0) {
            ready.push_back(reader);
            std::push_heap(ready.begin(), ready.end(), std::greater<>());
          }
        }
      }
    }
  }
  size_t live = 0;
  for (const Node& node : nodes) live += node.dead ? 0 : 1;
  if (order.size() != live) {
    for (size_t n = 0; n < nodes.size(); ++n) {
      if (!nodes[n].dead && pending[n] > 0) {
        fail("the graph has a cycle through ", describe(nodes[n]));
      }
    }
  }
  return order;
}

void Graph::compact() {
  std::vector<Node> kept;
  kept.reserve(nodes.size());
  for (Node& node : nodes) {
    if (!node.dead) kept.push_back(std::move(node));
  }
  nodes = std::move(kept);
  for (Value& value : values) value.producer = -1;
  for (size_t n = 0; n < nodes.size(); ++n) {
    for (int v : nodes[n].outputs) {
      if (v >= 0) values[static_cast<size_t>(v)].producer = static_cast<int>(n);
    }
  }
}

std::string Graph::describe(const Node& node) const {
  return str("node '", node.name.empty() ? std::string("<unnamed>") : node.name, "' (",
             node.domain.empty() ? "" : node.domain + ".", node.op_type, ")");
}

}  // namespace kiln::planner
