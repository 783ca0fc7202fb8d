// kiln._kiln: the compiled half of the Python package (python/kiln/ is the
// rest). Thin bindings: the program and its methods (runtime.h), planning
// and self-tests (planning.h), the CPU kernels' instruction-set path. The
// Python layer checks arguments and makes the arrays; errors are raised as
// the exceptions of kiln/errors.py.

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstring>

#include "cli/args.h"
#include "cli/plan_options.h"
#include "cli/quantize_options.h"
#include "core/error.h"
#include "kiln/kernels/isa.h"
#include "planning.h"
#include "runtime.h"
#include "targets/target.h"

namespace py = pybind11;

namespace kiln::python {
namespace {

// Raises the exception kiln.errors makes of (kind, message, status).
void raise(const char* kind, const std::string& message, const std::string& status = "") {
  py::object error = py::module_::import("kiln.errors").attr("_from_kiln")(kind, message, status);
  PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(error.ptr())), error.ptr());
}

void translate(std::exception_ptr pending) {
  try {
    if (pending) std::rethrow_exception(pending);
  } catch (const RunFailure& e) {
    raise("run", e.message, e.status);
  } catch (const planner::UnsupportedError& e) {
    raise("unsupported", e.what());
  } catch (const planner::PlanError& e) {
    raise("plan", e.what());
  } catch (const planner::cli::UsageError& e) {
    raise("option", e.message);
  }
}

planner::DType dtype_of(const py::array& array) {
  const py::dtype dtype = array.dtype();
  const char kind = dtype.kind();
  const auto size = dtype.itemsize();
  using D = planner::DType;
  if (kind == 'f' && size == 4) return D::FLOAT32;
  if (kind == 'f' && size == 8) return D::FLOAT64;
  if (kind == 'f' && size == 2) return D::FLOAT16;
  if (kind == 'b') return D::BOOL;
  if (kind == 'i' || kind == 'u') {
    const bool u = kind == 'u';
    switch (size) {
      case 1: return u ? D::UINT8 : D::INT8;
      case 2: return u ? D::UINT16 : D::INT16;
      case 4: return u ? D::UINT32 : D::INT32;
      case 8: return u ? D::UINT64 : D::INT64;
    }
  }
  throw planner::PlanError("arrays of dtype " + py::str(static_cast<const py::handle&>(dtype)).cast<std::string>() +
                           " have no kiln dtype");
}

planner::HostTensor host_tensor(const py::array& input) {
  const py::array array = py::array::ensure(input, py::array::c_style);
  planner::HostTensor t(dtype_of(array), std::vector<int64_t>(array.shape(), array.shape() + array.ndim()));
  if (t.nbytes() > 0) std::memcpy(t.bytes.data(), array.data(), t.nbytes());
  return t;
}

std::vector<planner::HostTensor> host_tensors(const std::vector<py::array>& arrays) {
  std::vector<planner::HostTensor> out;
  for (const py::array& a : arrays) out.push_back(host_tensor(a));
  return out;
}

py::dict tensor_dict(const TensorDescription& t) {
  py::dict d;
  d["name"] = t.name;
  d["dtype"] = planner::dtype_str(static_cast<planner::DType>(t.dtype));
  d["shape"] = py::tuple(py::cast(t.shape));
  d["nbytes"] = t.nbytes;
  d["device"] = t.device;
  if (t.quantization.quantized) {
    d["quantization"] = py::make_tuple(t.quantization.scale, t.quantization.zero_point);
  } else {
    d["quantization"] = py::none();
  }
  return d;
}

py::dict method_dict(const MethodDescription& m) {
  py::list inputs, outputs, arenas;
  for (const TensorDescription& t : m.inputs) inputs.append(tensor_dict(t));
  for (const TensorDescription& t : m.outputs) outputs.append(tensor_dict(t));
  for (const ArenaDescription& a : m.arenas) {
    py::dict d;
    d["size"] = a.size;
    d["alignment"] = a.alignment;
    d["device"] = a.device;
    d["region"] = a.region;
    d["symmetric"] = a.symmetric;
    d["group"] = a.group;
    arenas.append(d);
  }
  py::dict d;
  d["name"] = m.name;
  d["inputs"] = inputs;
  d["outputs"] = outputs;
  d["arenas"] = arenas;
  d["bookkeeping_bytes"] = m.bookkeeping_bytes;
  py::list bounds;
  for (const SymbolDescription& s : m.symbols) {
    py::dict b;
    b["name"] = s.name;
    b["input"] = s.input;
    b["axis"] = s.axis;
    b["min"] = s.min;
    b["max"] = s.max;
    bounds.append(b);
  }
  d["bounds"] = bounds;
  return d;
}

// The arrays' memory, which must be C-contiguous (the Python layer makes it
// so): the runtime reads and writes it in place.
// With `shaped`, each buffer also carries its array's shape (inputs of a
// method with inputs bounded above are bound with their extents).
std::vector<MethodHandle::Buffer> buffers(const std::vector<py::array>& arrays, bool shaped = false) {
  std::vector<MethodHandle::Buffer> out;
  for (const py::array& a : arrays) {
    if (!(a.flags() & py::array::c_style)) throw RunFailure{"InvalidArgument", "arrays must be C-contiguous"};
    std::vector<int64_t> dims;
    if (shaped) dims.assign(a.shape(), a.shape() + a.ndim());
    out.push_back({a.data(), static_cast<size_t>(a.nbytes()), std::move(dims)});
  }
  return out;
}

void bind_runtime(py::module_& m) {
  py::class_<ProgramHandle, std::shared_ptr<ProgramHandle>>(m, "ProgramHandle")
      .def(py::init([](py::bytes data) { return std::make_shared<ProgramHandle>(std::string(data)); }))
      .def("bytes", [](const ProgramHandle& p) { return py::bytes(reinterpret_cast<const char*>(p.data()), p.size()); })
      .def("method_names", &ProgramHandle::method_names)
      .def("describe", [](const ProgramHandle& p, const std::string& name) { return method_dict(p.describe(name)); });
  py::class_<MethodHandle>(m, "MethodHandle")
      .def(py::init<std::shared_ptr<const ProgramHandle>, const std::string&>())
      .def(
          "run",
          [](MethodHandle& method, const std::vector<py::array>& inputs, const std::vector<py::array>& outputs,
             bool shaped) {
            const std::vector<MethodHandle::Buffer> in = buffers(inputs, shaped), out = buffers(outputs);
            const py::gil_scoped_release unlocked;
            return method.run(in, out);
          },
          py::arg("inputs"), py::arg("outputs"), py::arg("shaped") = false)
      .def("set_threads", &MethodHandle::set_threads)
      .def("threads", &MethodHandle::threads);
}

void bind_planner(py::module_& m) {
  m.def("plan", [](const std::string& model, bool is_path, const std::vector<std::string>& arguments,
                   const std::map<std::string, py::array>& frozen) {
    std::map<std::string, planner::HostTensor> tensors;
    for (const auto& [name, array] : frozen) tensors[name] = host_tensor(array);
    Planned planned;
    {
      const py::gil_scoped_release unlocked;
      planned = plan_model(model, is_path, arguments, std::move(tensors));
    }
    return py::make_tuple(py::bytes(planned.bytes), planned.report_json, planned.memory_svg);
  });
  m.def("plan_option_names", &planner::cli::plan_option_names);
  m.def("builtin_backends", [] {
    std::vector<std::string> names;
    for (const planner::HostBackendInfo& info : planner::host_backends()) names.push_back(info.name);
    return names;
  });
  m.def("make_self_test", [](py::bytes program, const std::string& method, const std::vector<py::array>& inputs,
                             const std::vector<py::array>& outputs, float tolerance) {
    return py::bytes(make_self_test(program, method, host_tensors(inputs), host_tensors(outputs), tolerance));
  });
  m.def("run_self_test", [](py::bytes program, py::bytes test, const std::string& method, int threads) {
    const std::string p = program, t = test;
    SelfTestVerdict v;
    {
      const py::gil_scoped_release unlocked;
      v = run_self_test(p, t, method, threads);
    }
    return py::make_tuple(v.passed, v.num_outputs, v.worst_output, v.max_error, v.tolerance);
  });
}

py::dict range_dict(const planner::quantize::LayerRange& l) {
  py::dict d;
  d["tensor"] = l.tensor;
  d["node"] = l.node;
  d["op"] = l.op;
  if (l.shared_from.empty()) {
    d["observed"] = py::make_tuple(l.observed.min, l.observed.max);
    d["range"] = py::make_tuple(l.range.min, l.range.max);
    d["shared_from"] = py::none();
  } else {
    d["observed"] = py::none();
    d["range"] = py::none();
    d["shared_from"] = l.shared_from;
  }
  d["scale"] = l.params.scale;
  d["zero_point"] = l.params.zero_point;
  return d;
}

py::dict accuracy_dict(const planner::quantize::OutputAccuracy& a) {
  py::dict d;
  d["output"] = a.name;
  d["max_abs_error"] = a.max_abs_error;
  d["rms_error"] = a.rms_error;
  d["float_rms"] = a.float_rms;
  d["sqnr_db"] = a.sqnr_db;
  if (a.rows > 0) {
    d["rows"] = a.rows;
    d["top1_agree"] = a.top1_agree;
  }
  return d;
}

py::dict quantize_dict(const planner::quantize::QuantizeResult& r) {
  py::list layers, accuracy;
  for (const auto& l : r.layers) layers.append(range_dict(l));
  for (const auto& a : r.accuracy) accuracy.append(accuracy_dict(a));
  py::dict d;
  d["samples"] = r.samples;
  d["batch_norms_folded"] = r.batch_norms_folded;
  d["weights"] = r.weights;
  d["biases"] = r.biases;
  d["quantized_nodes"] = r.quantized_nodes;
  d["float_nodes"] = r.float_nodes;
  d["removed_nodes"] = r.removed_nodes;
  d["layers"] = layers;
  d["accuracy"] = accuracy;
  return d;
}

// Calibration items from Python: each a list of (name, array) pairs, the
// name empty for arrays given in input order.
std::vector<CalibrationItem> calibration_items(const std::vector<std::vector<std::pair<std::string, py::array>>>& in) {
  std::vector<CalibrationItem> items;
  for (const auto& item : in) {
    CalibrationItem converted;
    for (const auto& [name, array] : item) converted.emplace_back(name, host_tensor(array));
    items.push_back(std::move(converted));
  }
  return items;
}

void bind_quantizer(py::module_& m) {
  m.def("quantize",
        [](const std::string& model, bool is_path, const std::vector<std::string>& arguments, const std::string& folder,
           const std::vector<std::vector<std::pair<std::string, py::array>>>& items) {
          std::vector<CalibrationItem> converted = calibration_items(items);
          planner::quantize::QuantizeResult result;
          {
            const py::gil_scoped_release unlocked;
            result = quantize_model(model, is_path, arguments, folder, std::move(converted));
          }
          return py::make_tuple(py::bytes(result.model_bytes), quantize_dict(result));
        });
  m.def("quantize_option_names", &planner::cli::quantize_option_names);
}

void bind_isa(py::module_& m) {
  namespace kk = kernels;
  m.def("active_isa", [] { return std::string(kk::isa_name(kk::active_isa())); });
  m.def("processor_isa", [] { return std::string(kk::isa_name(kk::processor_isa())); });
  m.def("isa_paths", [] {
    std::vector<std::string> paths;
    for (kk::Isa isa : {kk::Isa::kScalar, kk::Isa::kAvx2, kk::Isa::kAvx512, kk::Isa::kNeon}) {
      if (kk::processor_has(isa)) paths.emplace_back(kk::isa_name(isa));
    }
    return paths;
  });
  m.def("set_isa", [](const std::string& name) {
    kk::Isa isa;
    if (!kk::parse_isa(name.c_str(), &isa)) throw planner::cli::UsageError{"unknown ISA path '" + name + "'"};
    if (kk::set_isa(isa) != Error::kOk) {
      throw RunFailure{"NotSupported", "this processor cannot run the " + name + " path (its best is " +
                                           kk::isa_name(kk::processor_isa()) + ")"};
    }
  });
}

}  // namespace
}  // namespace kiln::python

PYBIND11_MODULE(_kiln, m) {
  m.doc() = "kiln's compiled bindings; use the kiln package, not this module";
  kiln::planner::register_builtin_backends();
  py::register_exception_translator(&kiln::python::translate);
  kiln::python::bind_runtime(m);
  kiln::python::bind_planner(m);
  kiln::python::bind_quantizer(m);
  kiln::python::bind_isa(m);
}
