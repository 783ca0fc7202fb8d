#include "passes/bounds.h"

#include <algorithm>
#include <cstdlib>
#include <numeric>

#include "core/error.h"
#include "kiln/schema/device.h"
#include "lower/program.h"

namespace kiln::planner {
namespace {

std::string values_str(const std::vector<BoundSymbol>& symbols, const std::vector<int64_t>& values) {
  std::string s;
  for (size_t k = 0; k < symbols.size(); ++k) {
    s += (k ? ", " : "") + symbols[k].name + "=" + std::to_string(values[k]);
  }
  return s;
}

int64_t floor_div(int64_t a, int64_t b) {
  const int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

int64_t evaluate(const LDynamicDim& d, int64_t s) {
  return d.scale * floor_div(d.mul * s + d.bias, d.divisor) + d.offset;
}

// The simplest formula through every (S, extent) point; `reference` is the
// point at every symbol's max. Smallest divisor first, then the multiplier
// nearest the slope, then the bias.
bool fit_points(const std::vector<std::pair<int64_t, int64_t>>& points, std::pair<int64_t, int64_t> reference,
                LDynamicDim* out) {
  int64_t g = 0;
  for (const auto& [s, y] : points) g = std::gcd(g, std::llabs(y - reference.second));
  if (g == 0) return false;
  // The point farthest from the reference sets the slope's estimate.
  auto far = points.front();
  for (const auto& p : points) {
    if (std::llabs(p.first - reference.first) > std::llabs(far.first - reference.first)) far = p;
  }
  if (far.first == reference.first) return false;
  for (const int64_t sign : {int64_t{1}, int64_t{-1}}) {
    const int64_t scale = sign * static_cast<int64_t>(g);
    const double slope =
        static_cast<double>((far.second - reference.second) / scale) / static_cast<double>(far.first - reference.first);
    for (int64_t divisor = 1; divisor <= 256; ++divisor) {
      const auto center = static_cast<int64_t>(slope * static_cast<double>(divisor));
      for (int64_t mul = center - 1; mul <= center + 1; ++mul) {
        if (mul == 0) continue;
        for (int64_t bias = 0; bias < divisor; ++bias) {
          LDynamicDim d;
          d.scale = scale;
          d.mul = mul;
          d.bias = bias;
          d.divisor = divisor;
          d.offset = 0;
          d.offset = reference.second - evaluate(d, reference.first);
          bool all = true;
          for (const auto& [s, y] : points) all = all && evaluate(d, s) == y;
          if (all) {
            *out = d;
            return true;
          }
        }
      }
    }
  }
  return false;
}

std::string tensor_label(const LMethod& method, int t) {
  const std::string& name = method.tensors[static_cast<size_t>(t)].name;
  return "tensor " + std::to_string(t) + (name.empty() ? "" : " '" + name + "'");
}

std::string instruction_label(const LInstruction& ins, size_t i) {
  return "instruction " + std::to_string(i) + " (" + ins.what() + (ins.name.empty() ? "" : " '" + ins.name + "'") + ")";
}

}  // namespace

std::vector<BoundSymbol> group_bounds(const std::vector<InputBound>& bounds,
                                      const std::map<std::string, std::vector<std::string>>& dim_params) {
  auto param_of = [&](const std::string& input, uint32_t axis) -> std::string {
    auto it = dim_params.find(input);
    if (it == dim_params.end() || axis >= it->second.size()) return "";
    return it->second[axis];
  };
  std::vector<BoundSymbol> symbols;
  for (const InputBound& b : bounds) {
    const std::string param = param_of(b.input, b.axis);
    const std::string name = param.empty() ? b.input + "[" + std::to_string(b.axis) + "]" : param;
    auto it = std::find_if(symbols.begin(), symbols.end(), [&](const BoundSymbol& s) { return s.name == name; });
    if (it == symbols.end()) {
      symbols.push_back({name, {{b.input, b.axis}}, b.min, b.max});
      continue;
    }
    if (it->min != b.min || it->max != b.max) {
      fail("--input-shape: dimension '", name, "' is bounded ", it->min, ":", it->max, " on input '", it->dims[0].first,
           "' and ", b.min, ":", b.max, " on input '", b.input, "'; the model names both '", name,
           "', so they take one value: give them one bound");
    }
    it->dims.push_back({b.input, b.axis});
  }
  // An input dimension of the same name left fixed would disagree at run time.
  for (const BoundSymbol& s : symbols) {
    for (const auto& [input, params] : dim_params) {
      for (uint32_t axis = 0; axis < params.size(); ++axis) {
        if (params[axis] != s.name) continue;
        const bool bounded = std::find(s.dims.begin(), s.dims.end(), std::make_pair(input, axis)) != s.dims.end();
        if (!bounded) {
          fail("--input-shape: input '", input, "' dimension ", axis, " is '", s.name, "' too, which is bounded ",
               s.min, ":", s.max, " on input '", s.dims[0].first, "': bound it the same way");
        }
      }
    }
  }
  return symbols;
}

std::vector<std::vector<int64_t>> bound_samples(const std::vector<BoundSymbol>& symbols) {
  std::vector<int64_t> top;
  for (const BoundSymbol& s : symbols) top.push_back(s.max);
  std::vector<std::vector<int64_t>> samples;
  auto add = [&](std::vector<int64_t> values) {
    if (values != top && std::find(samples.begin(), samples.end(), values) == samples.end()) samples.push_back(values);
  };
  for (size_t k = 0; k < symbols.size(); ++k) {
    const int64_t lo = symbols[k].min;
    const int64_t hi = symbols[k].max;
    std::vector<int64_t> values;
    if (hi - lo < 12) {
      for (int64_t v = lo; v < hi; ++v) values.push_back(v);
    } else {
      // Both ends, around the middle and the quarters, and a value that
      // no small stride divides evenly.
      const int64_t span = hi - lo;
      values = {lo,     lo + 1, lo + 2, lo + span / 4, lo + span / 2, lo + span / 2 + 1, lo + 3 * span / 4,
                hi - 2, hi - 1, lo + 7};
    }
    for (int64_t v : values) {
      std::vector<int64_t> point = top;
      point[k] = v;
      add(point);
    }
  }
  if (symbols.size() > 1) {
    std::vector<int64_t> low;
    std::vector<int64_t> mid;
    for (const BoundSymbol& s : symbols) {
      low.push_back(s.min);
      mid.push_back(s.min + (s.max - s.min) / 2);
    }
    add(low);
    add(mid);
  }
  return samples;
}

std::map<std::string, std::vector<int64_t>> shapes_at(const std::map<std::string, std::vector<int64_t>>& max_shapes,
                                                      const std::vector<BoundSymbol>& symbols,
                                                      const std::vector<int64_t>& values) {
  std::map<std::string, std::vector<int64_t>> shapes = max_shapes;
  for (size_t k = 0; k < symbols.size(); ++k) {
    for (const auto& [input, axis] : symbols[k].dims) shapes[input][axis] = values[k];
  }
  return shapes;
}

BoundsFit::BoundsFit(const LMethod& reference, const LProgram& reference_program, std::vector<BoundSymbol> symbols)
    : reference_(reference), reference_program_(reference_program), symbols_(std::move(symbols)) {}

void BoundsFit::add_sample(const std::vector<int64_t>& values, const LMethod& method, const LProgram& program) {
  const LMethod& ref = reference_;
  auto differ = [&](const std::string& what) {
    fail("--input-shape: the method at ", values_str(symbols_, values),
         " is not the method at the bounds' maximum with other extents: ", what,
         ". Bounded inputs need the same instructions and parameters at every size; plan this size separately");
  };
  if (method.tensors.size() != ref.tensors.size()) {
    differ(std::to_string(method.tensors.size()) + " tensors against " + std::to_string(ref.tensors.size()));
  }
  if (method.instructions.size() != ref.instructions.size()) {
    differ(std::to_string(method.instructions.size()) + " instructions against " +
           std::to_string(ref.instructions.size()));
  }
  for (size_t i = 0; i < ref.instructions.size(); ++i) {
    const LInstruction& a = ref.instructions[i];
    const LInstruction& b = method.instructions[i];
    if (a.kind != b.kind || a.op != b.op) differ(instruction_label(a, i) + " becomes " + b.what());
    if (a.inputs != b.inputs || a.outputs != b.outputs || a.scratch != b.scratch) {
      differ(instruction_label(a, i) + " has other operands");
    }
    if (!same_instruction(a, b)) differ(instruction_label(a, i) + "'s parameters change with the size");
  }
  if (method.init_instructions.size() != ref.init_instructions.size()) differ("other load-time instructions");
  for (size_t t = 0; t < ref.tensors.size(); ++t) {
    const LTensor& a = ref.tensors[t];
    const LTensor& b = method.tensors[t];
    // The same tensor but for its extents.
    LTensor b_at_max = b;
    if (b.shape.size() == a.shape.size()) b_at_max.shape = a.shape;
    const bool same = same_tensor(a, b_at_max);
    if (!same) differ(tensor_label(ref, static_cast<int>(t)) + " is another kind of tensor");
    if (a.storage == Storage::kConstant && a.constant >= 0) {
      const HostTensor& ca = *reference_program_.constants[static_cast<size_t>(a.constant)];
      const HostTensor& cb = *program.constants[static_cast<size_t>(b.constant)];
      const bool prefix =
          cb.bytes.size() <= ca.bytes.size() && std::equal(cb.bytes.begin(), cb.bytes.end(), ca.bytes.begin());
      if (!prefix || (ca.shape == cb.shape && ca.bytes != cb.bytes)) {
        differ("the constant " + tensor_label(ref, static_cast<int>(t)) +
               " was folded from the bounded dimension: its value here is not the first elements of its value at "
               "the maximum");
      }
    }
    for (uint32_t axis = 0; axis < a.shape.size(); ++axis) {
      auto& seen = extents_[{static_cast<int>(t), axis}];
      seen.resize(samples_.size(), a.shape[axis]);
      seen.push_back(b.shape[axis]);
    }
  }
  samples_.push_back(values);
}

std::set<int> BoundsFit::dynamic_tensors() const {
  std::set<int> out;
  for (const auto& [key, seen] : extents_) {
    const int64_t ref = reference_.tensors[static_cast<size_t>(key.first)].shape[key.second];
    for (int64_t v : seen) {
      if (v != ref) out.insert(key.first);
    }
  }
  return out;
}

void BoundsFit::fit(LMethod& method) const {
  std::vector<int64_t> top;
  for (const BoundSymbol& s : symbols_) top.push_back(s.max);
  method.symbols.clear();
  method.dynamic_dims.clear();
  for (const BoundSymbol& s : symbols_) {
    LSymbol symbol;
    symbol.name = s.name;
    symbol.min = s.min;
    symbol.max = s.max;
    symbol.axis = s.dims[0].second;
    symbol.input = -1;
    for (size_t i = 0; i < method.inputs.size(); ++i) {
      if (method.tensors[static_cast<size_t>(method.inputs[i])].name == s.dims[0].first)
        symbol.input = static_cast<int>(i);
    }
    if (symbol.input < 0) fail("--input-shape: input '", s.dims[0].first, "' is not an input of the planned method");
    method.symbols.push_back(symbol);
  }
  // Scratch keeps its planned extent: a kernel needs at most that much at
  // any smaller size (its check says so again at bind time).
  std::set<int> scratch;
  for (const LInstruction& ins : reference_.instructions) scratch.insert(ins.scratch.begin(), ins.scratch.end());
  for (const auto& [key, seen] : extents_) {
    const auto [t, axis] = key;
    if (scratch.count(t) != 0) continue;
    const LTensor& tensor = reference_.tensors[static_cast<size_t>(t)];
    const int64_t ref = tensor.shape[axis];
    if (std::all_of(seen.begin(), seen.end(), [&](int64_t v) { return v == ref; })) continue;
    if (tensor.device.type() != fb::DeviceType::CPU) {
      fail("--input-shape: ", tensor_label(reference_, t),
           " lives on a device and changes with the bound dimension; "
           "bounded inputs are planned for the CPU only (delegates compile fixed shapes)");
    }
    // The symbols it depends on: those whose sample alone changes it.
    uint32_t mask = 0;
    for (size_t j = 0; j < samples_.size(); ++j) {
      int varied = -1;
      int count = 0;
      for (size_t k = 0; k < symbols_.size(); ++k) {
        if (samples_[j][k] != top[k]) {
          varied = static_cast<int>(k);
          ++count;
        }
      }
      if (count == 1 && seen[j] != ref) mask |= 1u << varied;
    }
    auto product = [&](const std::vector<int64_t>& values) {
      int64_t p = 1;
      for (size_t k = 0; k < symbols_.size(); ++k) {
        if (mask & (1u << k)) p *= values[k];
      }
      return p;
    };
    std::vector<std::pair<int64_t, int64_t>> points;
    const std::pair<int64_t, int64_t> reference{product(top), ref};
    bool function = mask != 0;
    for (size_t j = 0; j < samples_.size() && function; ++j) {
      const std::pair<int64_t, int64_t> p{product(samples_[j]), seen[j]};
      for (const auto& q : points) function = function && (q.first != p.first || q.second == p.second);
      if (p.first == reference.first) function = function && p.second == reference.second;
      points.push_back(p);
    }
    LDynamicDim d;
    if (!function || !fit_points(points, reference, &d)) {
      std::string observed;
      for (size_t j = 0; j < samples_.size(); ++j) {
        observed += "; " + values_str(symbols_, samples_[j]) + ": " + std::to_string(seen[j]);
      }
      fail("--input-shape: dimension ", axis, " of ", tensor_label(reference_, t), " (", ref,
           " at the maximum) follows the bound dimensions in a way kiln cannot write as "
           "scale*floor((mul*S+bias)/divisor)+offset",
           observed);
    }
    d.tensor = static_cast<uint32_t>(t);
    d.axis = axis;
    d.symbols = mask;
    method.dynamic_dims.push_back(d);
  }
  // extents_ is ordered by (tensor, axis): so is dynamic_dims.
}

}  // namespace kiln::planner
