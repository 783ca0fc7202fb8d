#include "verify/verifier.h"

#include <algorithm>
#include <numeric>

#include "core/error.h"
#include "core/host_tensor.h"
#include "emit/program_file.h"
#include "kiln/schema/delegate_generated.h"
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

// The DelegateGraph of a delegate, or nullptr when its blob is not one.
const fb::DelegateGraph* delegate_graph(const ProgramFile& file, const fb::Delegate& delegate) {
  const uint8_t* data = nullptr;
  size_t size = 0;
  if (delegate.inline_blob() != nullptr) {
    data = delegate.inline_blob()->data();
    size = delegate.inline_blob()->size();
  } else if (delegate.segment() >= 0 && file.program().segments() != nullptr &&
             static_cast<uint32_t>(delegate.segment()) < file.program().segments()->size()) {
    const fb::DataRef* ref = file.program().segments()->Get(static_cast<uint32_t>(delegate.segment()));
    if (file.segment_offset() + ref->offset() + ref->size() <= file.file_size()) {
      data = file.data() + file.segment_offset() + ref->offset();
      size = ref->size();
    }
  }
  if (data == nullptr || size < 8 || !fb::DelegateGraphBufferHasIdentifier(data)) return nullptr;
  flatbuffers::Verifier verifier(data, size, 64, 1000000);
  if (!fb::VerifyDelegateGraphBuffer(verifier)) return nullptr;
  return fb::GetDelegateGraph(data);
}

// A device all-reduce's signal words (8 bytes per block, passes/all_reduce.h)
// lie inside its symmetric arena, after every tensor planned there: nothing
// else ever writes them.
void verify_signals(const fb::Method& m, uint32_t i, const fb::CollectiveCall& call, uint32_t arena_index,
                    const fb::Arena& arena, const std::string& where, std::vector<std::string>& errors) {
  const uint64_t end = call.signal_offset() + uint64_t{call.blocks()} * 8;
  if (call.blocks() == 0 || end > arena.size()) {
    errors.push_back(where + str("collective ", i, "'s signal words (", call.blocks(), " blocks at offset ",
                                 call.signal_offset(), ") leave its symmetric arena of ", arena.size(), " bytes"));
    return;
  }
  for (uint32_t t = 0; t < m.tensors()->size(); ++t) {
    const fb::PlannedStorage* p = storage_of(*m.tensors()->Get(t));
    if (p == nullptr || p->arena() != arena_index) continue;
    if (p->offset() + m.tensors()->Get(t)->nbytes() > call.signal_offset()) {
      errors.push_back(where + str("collective ", i, "'s signal words at offset ", call.signal_offset(),
                                   " overlap tensor ", name_of(m, t)));
    }
  }
}

// Every collective reads its input from the symmetric arena of its own
// group (passes/symmetric.h), and the group has a communicator.
void verify_collectives(const fb::Method& m, const std::vector<int>& root, const std::string& where,
                        std::vector<std::string>& errors) {
  if (m.instructions() == nullptr) return;
  const uint32_t n = static_cast<uint32_t>(root.size());
  for (uint32_t i = 0; i < m.instructions()->size(); ++i) {
    const fb::CollectiveCall* call = m.instructions()->Get(i)->kind_as_CollectiveCall();
    if (call == nullptr) continue;
    bool known = false;
    if (m.communicators() != nullptr) {
      for (const fb::Communicator* c : *m.communicators()) known = known || c->group() == call->group();
    }
    if (!known)
      errors.push_back(where + str("collective ", i, " names group ", call->group(), " without a communicator"));
    if (call->inputs() == nullptr || call->inputs()->size() == 0) continue;
    if (call->inputs()->size() > 1 && call->algorithm() == fb::AllReduceAlgorithm::COMMUNICATOR) {
      errors.push_back(where + str("collective ", i, " has addends but no device kernels"));
    }
    // The reduced operand (inputs after it are addends, anywhere on the device).
    for (int32_t t : {call->inputs()->Get(0)}) {
      if (t < 0 || static_cast<uint32_t>(t) >= n || root[static_cast<size_t>(t)] < 0) continue;
      const fb::PlannedStorage* p = storage_of(*m.tensors()->Get(static_cast<uint32_t>(root[static_cast<size_t>(t)])));
      const fb::Arena* arena = p != nullptr && m.arenas() != nullptr && p->arena() < m.arenas()->size()
                                   ? m.arenas()->Get(p->arena())
                                   : nullptr;
      if (arena == nullptr || arena->kind() != fb::ArenaKind::SYMMETRIC || arena->group() != call->group()) {
        errors.push_back(where + str("collective ", i, " reads ", name_of(m, static_cast<uint32_t>(t)),
                                     ", which is not in a symmetric arena of group ", call->group()));
        continue;
      }
      if (call->algorithm() != fb::AllReduceAlgorithm::COMMUNICATOR) {
        verify_signals(m, i, *call, p->arena(), *arena, where, errors);
      }
    }
  }
}

// An alias t of root r (r != t) is no larger than its root, lies inside its
// base at a whole element and lives on its root's device.
void check_alias(const fb::Method& m, uint32_t t, uint32_t r, const std::string& where,
                 std::vector<std::string>& errors) {
  const auto* a = m.tensors()->Get(t);
  const auto* b = m.tensors()->Get(r);
  if (a->nbytes() > b->nbytes()) {
    errors.push_back(where + str("alias ", name_of(m, t), " is larger than its base ", name_of(m, r)));
  }
  // Its bytes lie inside its base's (each link so, the chain lies inside
  // the root, whose extent the overlap check covers).
  const fb::AliasStorage* alias = a->storage_as_AliasStorage();
  const auto* base = m.tensors()->Get(alias->base());
  if (alias->offset() > base->nbytes() || a->nbytes() > base->nbytes() - alias->offset()) {
    errors.push_back(where + str("alias ", name_of(m, t), " (", a->nbytes(), " bytes at offset ", alias->offset(),
                                 ") leaves its base ", name_of(m, alias->base())));
  }
  if (alias->offset() % dtype_bytes(static_cast<DType>(a->dtype())) != 0) {
    errors.push_back(where + str("alias ", name_of(m, t), " starts at offset ", alias->offset(),
                                 ", not a whole element of its dtype"));
  }
  if (a->device() && b->device() &&
      (a->device()->type() != b->device()->type() || a->device()->index() != b->device()->index())) {
    errors.push_back(where + str("alias ", name_of(m, t), " is on another device than its base ", name_of(m, r)));
  }
}

// The root of every tensor's alias chain (itself when it is no alias), -1
// where the chain is broken or cyclic; checks each alias on the way.
std::vector<int> alias_roots(const fb::Method& m, const std::string& where, std::vector<std::string>& errors) {
  const uint32_t n = m.tensors() != nullptr ? m.tensors()->size() : 0;
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
    if (r != t) check_alias(m, t, r, where, errors);
  }
  return root;
}

// When each root tensor is used, recomputed from the instructions.
struct Lifetimes {
  std::vector<int> first, last;  // steps, inclusive; -1 where never used
  int end = 0;                   // the method's last step
};

// Time is counted in steps: one per instruction, and one per kernel inside
// a delegate whose blob is a kiln DelegateGraph, so delegate intermediates
// get lifetimes of their own. What load-time instructions write stays for
// the whole method.
Lifetimes lifetimes(const ProgramFile& file, const fb::Method& m, const std::vector<int>& root) {
  const uint32_t n = static_cast<uint32_t>(root.size());
  Lifetimes life;
  std::vector<int>& first = life.first;
  std::vector<int>& last = life.last;
  first.assign(n, -1);
  last.assign(n, -1);
  int step = 0;
  auto touch = [&](int64_t t, int at) {
    if (t < 0 || t >= n || root[static_cast<size_t>(t)] < 0) return;
    const size_t r = static_cast<size_t>(root[static_cast<size_t>(t)]);
    if (first[r] < 0 || at < first[r]) first[r] = at;
    last[r] = std::max(last[r], at);
  };
  auto each = [&](const flatbuffers::Vector<int32_t>* list, int at) {
    if (list == nullptr) return;
    for (int32_t t : *list) touch(t, at);
  };
  const uint32_t num_instructions = m.instructions() != nullptr ? m.instructions()->size() : 0;
  for (uint32_t i = 0; i < num_instructions; ++i, ++step) {
    const fb::Instruction* ins = m.instructions()->Get(i);
    switch (ins->kind_type()) {
      case fb::InstructionKind::KernelCall:
        each(ins->kind_as_KernelCall()->inputs(), step);
        each(ins->kind_as_KernelCall()->outputs(), step);
        each(ins->kind_as_KernelCall()->scratch(), step);
        break;
      case fb::InstructionKind::CopyCall:
        touch(ins->kind_as_CopyCall()->src(), step);
        touch(ins->kind_as_CopyCall()->dst(), step);
        break;
      case fb::InstructionKind::DelegateCall: {
        const auto* call = ins->kind_as_DelegateCall();
        const fb::DelegateGraph* graph = nullptr;
        if (m.delegates() != nullptr && call->delegate() < m.delegates()->size()) {
          graph = delegate_graph(file, *m.delegates()->Get(call->delegate()));
        }
        each(call->inputs(), step);
        if (graph != nullptr && graph->kernels() != nullptr) {
          for (const fb::KernelCall* kernel : *graph->kernels()) {
            each(kernel->inputs(), step);
            each(kernel->outputs(), step);
            each(kernel->scratch(), step);
            ++step;
          }
          --step;
        }
        each(call->outputs(), step);
        break;
      }
      case fb::InstructionKind::CollectiveCall:
        each(ins->kind_as_CollectiveCall()->inputs(), step);
        each(ins->kind_as_CollectiveCall()->outputs(), step);
        break;
      default: break;
    }
  }
  life.end = std::max(step - 1, 0);
  if (m.init_instructions() != nullptr) {
    for (const fb::Instruction* ins : *m.init_instructions()) {
      if (const auto* copy = ins->kind_as_CopyCall()) {
        touch(copy->dst(), 0);
        touch(copy->dst(), life.end);
      }
    }
  }
  return life;
}

// The bytes and lifetime of every planned tensor that is used and not
// empty; checks that each lies, aligned, inside an arena that exists.
std::vector<Extent> planned_extents(const fb::Method& m, const Lifetimes& life, const std::string& where,
                                    std::vector<std::string>& errors) {
  const uint32_t n = m.tensors() != nullptr ? m.tensors()->size() : 0;
  const uint32_t num_arenas = m.arenas() != nullptr ? m.arenas()->size() : 0;
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
      e.last = life.end;
    } else {
      e.first = life.first[t];
      e.last = life.last[t];
    }
    if (e.first < 0 || e.begin == e.end) continue;  // never touched or empty: shares nothing
    extents.push_back(e);
  }
  return extents;
}

// No two extents alive at once share bytes of an arena (the first 20
// such pairs are reported). A sweep by first use compares each extent with
// every extent still alive.
void check_overlaps(const fb::Method& m, std::vector<Extent>& extents, const std::string& where,
                    std::vector<std::string>& errors) {
  std::sort(extents.begin(), extents.end(), [](const Extent& a, const Extent& b) {
    return a.first != b.first ? a.first < b.first : a.tensor < b.tensor;
  });
  std::vector<const Extent*> alive;
  size_t reported = 0;
  for (const Extent& e : extents) {
    std::erase_if(alive, [&](const Extent* o) { return o->last < e.first; });
    for (const Extent* o : alive) {
      if (o->arena == e.arena && o->begin < e.end && e.begin < o->end && reported < 20) {
        errors.push_back(where + str(name_of(m, static_cast<uint32_t>(o->tensor)), " [bytes ", o->begin, "-", o->end,
                                     ", instructions ", o->first, "-", o->last, "] and ",
                                     name_of(m, static_cast<uint32_t>(e.tensor)), " [bytes ", e.begin, "-", e.end,
                                     ", instructions ", e.first, "-", e.last, "] share bytes of arena ", e.arena,
                                     " while both are alive, and neither is an alias of the other"));
        ++reported;
      }
    }
    alive.push_back(&e);
  }
}

void verify_method(const ProgramFile& file, const fb::Method& m, std::vector<std::string>& errors) {
  const std::string where = str("method '", m.name() != nullptr ? m.name()->str() : "?", "': ");
  const std::vector<int> root = alias_roots(m, where, errors);
  const Lifetimes life = lifetimes(file, m, root);
  verify_collectives(m, root, where, errors);
  std::vector<Extent> extents = planned_extents(m, life, where, errors);
  check_overlaps(m, extents, where, errors);
}

}  // namespace

std::vector<std::string> verify_program(const std::string& bytes) {
  std::vector<std::string> errors;
  try {
    const ProgramFile file(bytes, "program");
    if (file.program().methods() == nullptr) return {"program has no methods"};
    for (const fb::Method* m : *file.program().methods()) verify_method(file, *m, errors);
  } catch (const PlanError& e) {
    errors.push_back(e.what());
  }
  return errors;
}

}  // namespace kiln::planner
