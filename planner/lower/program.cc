#include "lower/program.h"

#include "kiln/schema/device.h"

namespace kiln::planner {
namespace {

std::string packed_params(const fb::ParamsUnion& params) {
  if (params.type == fb::Params::NONE) return {};
  flatbuffers::FlatBufferBuilder builder;
  builder.Finish(params.Pack(builder));
  return std::string(reinterpret_cast<const char*>(builder.GetBufferPointer()), builder.GetSize());
}

}  // namespace

bool same_instruction(const LInstruction& a, const LInstruction& b) {
  return a.kind == b.kind && a.op == b.op && a.inputs == b.inputs && a.outputs == b.outputs && a.scratch == b.scratch &&
         a.device == b.device && a.group == b.group && packed_params(a.params) == packed_params(b.params);
}

bool same_tensor(const LTensor& a, const LTensor& b) {
  return a.dtype == b.dtype && a.shape == b.shape && a.device == b.device && a.storage == b.storage &&
         a.constant == b.constant && a.alias_of == b.alias_of && a.alias_offset == b.alias_offset &&
         a.is_input == b.is_input && a.is_output == b.is_output && a.user_fallback == b.user_fallback &&
         a.persistent == b.persistent && a.symmetric_group == b.symmetric_group;
}

}  // namespace kiln::planner
