#include "verify/verifier.h"

#include <algorithm>
#include <numeric>

#include "core/error.h"
#include "emit/program_file.h"
#include "kiln/schema/program_generated.h"

namespace kiln::planner {
namespace {

struct Extent {
  int tensor = -1;  // root tensor
  uint32_t arena = 0;
  uint64_t begin = 0, end = 0;  // bytes [begin, end)
  int first = -1, last = -1;    // instructions, inclusive
};

std::string name_of(const fb::Method& m, uint32_t t) {
  const auto* tensor = m.tensors()->Get(t);
  return str("'", tensor->name() != nullptr ? tensor->name()->str() : std::string("?"), "' (tensor ", t, ")");
}

const fb::PlannedStorage* storage_of(const fb::Tensor& t) {
  if (t.storage_type() == fb::Storage::PlannedStorage) return t.storage_as_PlannedStorage();
  if (t.storage_type() == fb::Storage::UserStorage) return t.storage_as_UserStorage()->fallback();
  return nullptr;
}

void verify_method(const fb::Method& m, std::vector<std::string>& errors) {
  const std::string where = str("method '", m.name() != nullptr ? m.name()->str() : "?", "': ");
  const uint32_t n = m.tensors() != nullptr ? m.tensors()->size() : 0;
  const uint32_t num_arenas = m.arenas() != nullptr ? m.arenas()->size() : 0;
  // Roots of aliases, with cycle detection.
  std::vector<int> root(n, -1);
  for (uint32_t t = 0; t < n; ++t) {
    uint32_t r = t;
    uint32_t steps = 0;
    while (m.tensors()->Get(r)->storage_type() == fb::Storage::AliasStorage && steps <= n) {
      r = m.tensors()->Get(r)->storage_as_AliasStorage()->base();
      if (r >= n) break;
      ++steps;
    }
    if (r >= n || steps > n) {
      errors.push_back(where + str("alias chain of ", name_of(m, t), " is broken or cyclic"));
      continue;
    }
    root[t] = static_cast<int>(r);
    if (r != t) {
      const auto* a = m.tensors()->Get(t);
      const auto* b = m.tensors()->Get(r);
      if (a->nbytes() > b->nbytes()) {
        errors.push_back(where + str("alias ", name_of(m, t), " is larger than its base ", name_of(m, r)));
      }
      if (a->device() && b->device() &&
          (a->device()->type() != b->device()->type() || a->device()->index() != b->device()->index())) {
        errors.push_back(where + str("alias ", name_of(m, t), " is on another device than its base ", name_of(m, r)));
      }
    }
  }
  // Lifetimes, recomputed from the instructions.
  std::vector<int> first(n, -1), last(n, -1);
  auto touch = [&](int64_t t, int i) {
    if (t < 0 || t >= n || root[static_cast<size_t>(t)] < 0) return;
    const size_t r = static_cast<size_t>(root[static_cast<size_t>(t)]);
    if (first[r] < 0) first[r] = i;
    last[r] = std::max(last[r], i);
  };
  const uint32_t num_instructions = m.instructions() != nullptr ? m.instructions()->size() : 0;
  for (uint32_t i = 0; i < num_instructions; ++i) {
    const fb::Instruction* ins = m.instructions()->Get(i);
    auto each = [&](const flatbuffers::Vector<int32_t>* list) {
      if (list == nullptr) return;
      for (int32_t t : *list) touch(t, static_cast<int>(i));
    };
    switch (ins->kind_type()) {
      case fb::InstructionKind::KernelCall:
        each(ins->kind_as_KernelCall()->inputs());
        each(ins->kind_as_KernelCall()->outputs());
        each(ins->kind_as_KernelCall()->scratch());
        break;
      case fb::InstructionKind::CopyCall:
        touch(ins->kind_as_CopyCall()->src(), static_cast<int>(i));
        touch(ins->kind_as_CopyCall()->dst(), static_cast<int>(i));
        break;
      case fb::InstructionKind::DelegateCall:
        each(ins->kind_as_DelegateCall()->inputs());
        each(ins->kind_as_DelegateCall()->outputs());
        break;
      case fb::InstructionKind::CollectiveCall:
        each(ins->kind_as_CollectiveCall()->inputs());
        each(ins->kind_as_CollectiveCall()->outputs());
        break;
      default:
        break;
    }
  }
  std::vector<Extent> extents;
  for (uint32_t t = 0; t < n; ++t) {
    const fb::Tensor& tensor = *m.tensors()->Get(t);
    const fb::PlannedStorage* p = storage_of(tensor);
    if (p == nullptr) continue;
    if (p->arena() >= num_arenas) {
      errors.push_back(where + str(name_of(m, t), " names arena ", p->arena(), ", which does not exist"));
      continue;
    }
    const fb::Arena& arena = *m.arenas()->Get(p->arena());
    if (p->offset() + tensor.nbytes() > arena.size() || p->offset() + tensor.nbytes() < p->offset()) {
      errors.push_back(where + str(name_of(m, t), " at offset ", p->offset(), " + ", tensor.nbytes(),
                                   " bytes lies outside arena ", p->arena(), " (", arena.size(), " bytes)"));
    }
    if (arena.alignment() == 0 || p->offset() % arena.alignment() != 0) {
      errors.push_back(where + str(name_of(m, t), " offset ", p->offset(), " is not aligned to ", arena.alignment()));
    }
    Extent e;
    e.tensor = static_cast<int>(t);
    e.arena = p->arena();
    e.begin = p->offset();
    e.end = p->offset() + tensor.nbytes();
    if (tensor.storage_type() == fb::Storage::UserStorage) {
      // Bound by the application: alive for the whole method.
      e.first = 0;
      e.last = static_cast<int>(num_instructions);
    } else {
      e.first = first[t];
      e.last = last[t];
    }
    if (e.first < 0 || e.begin == e.end) continue;  // never touched or empty: shares nothing
    extents.push_back(e);
  }
  // Sweep by first use; compare with every extent still alive.
  std::sort(extents.begin(), extents.end(), [](const Extent& a, const Extent& b) {
    return a.first != b.first ? a.first < b.first : a.tensor < b.tensor;
  });
  std::vector<const Extent*> alive;
  size_t reported = 0;
  for (const Extent& e : extents) {
    std::erase_if(alive, [&](const Extent* o) { return o->last < e.first; });
    for (const Extent* o : alive) {
      if (o->arena == e.arena && o->begin < e.end && e.begin < o->end && reported < 20) {
        errors.push_back(where + str(name_of(m, static_cast<uint32_t>(o->tensor)), " [bytes ", o->begin, "-",
                                     o->end, ", instructions ", o->first, "-", o->last, "] and ",
                                     name_of(m, static_cast<uint32_t>(e.tensor)), " [bytes ", e.begin, "-", e.end,
                                     ", instructions ", e.first, "-", e.last, "] share bytes of arena ", e.arena,
                                     " while both are alive, and neither is an alias of the other"));
        ++reported;
      }
    }
    alive.push_back(&e);
  }
}

}  // namespace

std::vector<std::string> verify_program(const std::string& bytes) {
  std::vector<std::string> errors;
  try {
    const ProgramFile file(bytes, "program");
    if (file.program().methods() == nullptr) return {"program has no methods"};
    for (const fb::Method* m : *file.program().methods()) verify_method(*m, errors);
  } catch (const PlanError& e) {
    errors.push_back(e.what());
  }
  return errors;
}

}  // namespace kiln::planner
