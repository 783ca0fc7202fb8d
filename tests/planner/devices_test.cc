// Devices: partitioning across targets, device propagation, copies at
// boundaries, per-device arenas, delegates, and the errors of each step.
// Planner-only: no GPU is needed.

#include <gtest/gtest.h>

#include "core/device.h"
#include "core/error.h"
#include "emit/program_file.h"
#include "kiln/kernels/cpu.h"
#include "kiln/runtime/program.h"
#include "kiln/schema/delegate_generated.h"
#include "support/graph_builder.h"
#include "support/program_bytes.h"
#include "verify/verifier.h"

namespace kiln::testing {
namespace {

using planner::LInstruction;
using planner::LMethod;
using planner::LTensor;
using planner::PlanError;
using planner::PlanOptions;
using planner::PlanResult;
using planner::Storage;

PlanOptions on(const std::string& targets) {
  PlanOptions options;
  options.targets = targets;
  return options;
}

std::string dev(const fb::Device& d) { return planner::device_str(d); }

int count_copies(const LMethod& m) {
  int n = 0;
  for (const LInstruction& ins : m.instructions) n += ins.kind == LInstruction::Kind::kCopy ? 1 : 0;
  return n;
}

// conv -> relu -> maxpool -> flatten -> gemm: everything the Vulkan planner half takes.
void device_friendly(GraphBuilder& b) {
  const int x = b.input("x", {1, 3, 8, 8});
  const int conv =
      b.node("Conv", {x, b.ramp("w", {4, 3, 3, 3}), b.ramp("b", {4})}, {{"pads", ints_attr({1, 1, 1, 1})}});
  const int relu = b.node("Relu", {conv});
  const int pool = b.node("MaxPool", {relu}, {{"kernel_shape", ints_attr({2, 2})}, {"strides", ints_attr({2, 2})}});
  const int flat = b.node("Flatten", {pool});
  b.output(b.node("Gemm", {flat, b.ramp("fc", {64, 10})}));
}

// Every planned tensor sits in an arena of its own device, and every alias
// on its base's device: no bytes are shared across devices.
void expect_devices_kept_apart(const PlanResult& r) {
  const LMethod& m = r.program.methods[0];
  for (const LTensor& t : m.tensors) {
    if (t.has_memory()) {
      EXPECT_EQ(dev(m.arenas[static_cast<size_t>(t.arena)].device), dev(t.device)) << t.name;
    }
    if (t.storage == Storage::kAlias) {
      EXPECT_EQ(dev(m.tensors[static_cast<size_t>(t.alias_of)].device), dev(t.device)) << t.name;
    }
  }
  EXPECT_TRUE(planner::verify_program(r.bytes).empty());
}

TEST(DevicesTest, CpuOnlyProgramsAreUnchanged) {
  GraphBuilder b;
  device_friendly(b);
  const PlanResult plain = b.plan();
  const PlanResult cpu = b.plan(on("cpu"));
  EXPECT_EQ(plain.bytes, cpu.bytes);
  const LMethod& m = cpu.program.methods[0];
  ASSERT_EQ(m.arenas.size(), 1u);
  EXPECT_EQ(dev(m.arenas[0].device), "cpu:0");
  EXPECT_EQ(count_copies(m), 0);
}

TEST(DevicesTest, AllOnDeviceWastesNoHostArena) {
  GraphBuilder b;
  device_friendly(b);
  const PlanResult r = b.plan(on("vulkan:0,cpu"));
  const LMethod& m = r.program.methods[0];
  // Two arenas on the device (what runs, and the constants uploaded at
  // load), none on the host.
  ASSERT_EQ(m.arenas.size(), 2u);
  for (const auto& arena : m.arenas) {
    EXPECT_EQ(dev(arena.device), "vulkan:0");
    EXPECT_EQ(arena.alignment, 256u);
  }
  for (const LInstruction& ins : m.instructions) {
    if (ins.kind == LInstruction::Kind::kKernel) {
      EXPECT_EQ(dev(ins.device), "vulkan:0") << ins.op;
    }
  }
  // One copy in (the input), one out (the output); the weights go up once at load.
  EXPECT_EQ(count_copies(m), 2);
  EXPECT_EQ(m.init_instructions.size(), 3u);
  const planner::ProgramFile file(r.bytes, "program");
  const fb::Method& method = *file.program().methods()->Get(0);
  ASSERT_EQ(method.delegates()->size(), 1u);
  const fb::Delegate& delegate = *method.delegates()->Get(0);
  EXPECT_EQ(delegate.backend()->str(), "vulkan");
  EXPECT_EQ(dev(*delegate.device()), "vulkan:0");
  ASSERT_EQ(delegate.compile_specs()->size(), 1u);
  EXPECT_EQ(delegate.compile_specs()->Get(0)->key()->str(), "device");
  EXPECT_EQ(
      std::string(delegate.compile_specs()->Get(0)->value()->begin(), delegate.compile_specs()->Get(0)->value()->end()),
      "vulkan:0");
  ASSERT_TRUE(fb::DelegateGraphBufferHasIdentifier(delegate.inline_blob()->data()));
  const fb::DelegateGraph* graph = fb::GetDelegateGraph(delegate.inline_blob()->data());
  EXPECT_EQ(graph->kernels()->size(), 4u);  // conv, relu, pool, gemm (flatten is a view)
  EXPECT_GT(delegate.state_bytes(), 0u);
  expect_devices_kept_apart(r);
}

TEST(DevicesTest, DeviceIoKeepsInputsAndOutputsOnTheDevice) {
  GraphBuilder b;
  device_friendly(b);
  PlanOptions options = on("vulkan:0,cpu");
  options.device_io = true;
  const PlanResult r = b.plan(options);
  const LMethod& m = r.program.methods[0];
  EXPECT_EQ(count_copies(m), 0);
  for (int t : m.inputs) EXPECT_EQ(dev(m.tensors[static_cast<size_t>(t)].device), "vulkan:0");
  for (int t : m.outputs) EXPECT_EQ(dev(m.tensors[static_cast<size_t>(t)].device), "vulkan:0");
  expect_devices_kept_apart(r);
}

TEST(DevicesTest, MixedCpuAndDeviceGetSeparateArenas) {
  GraphBuilder b;
  const int x = b.input("x", {1, 4, 8, 8});
  const int conv = b.node("Conv", {x, b.ramp("w", {4, 4, 1, 1})});
  // The Vulkan planner half does not take PRelu.
  const int prelu = b.node("PRelu", {conv, b.constant("slope", HostTensor::from_floats({0.25f}, {1}))});
  const int relu = b.node("Relu", {prelu});
  b.output(b.node("Sigmoid", {relu}));
  const PlanResult r = b.plan(on("vulkan:0,cpu"));
  const LMethod& m = r.program.methods[0];
  std::set<std::string> devices;
  for (const auto& a : m.arenas) devices.insert(dev(a.device));
  EXPECT_EQ(devices, (std::set<std::string>{"cpu:0", "vulkan:0"}));
  for (const LInstruction& ins : m.instructions) {
    if (ins.kind != LInstruction::Kind::kKernel) continue;
    EXPECT_EQ(dev(ins.device), ins.op == "PRelu" ? "cpu:0" : "vulkan:0") << ins.op;
  }
  // In, down to the host for PRelu, back up, out.
  EXPECT_EQ(count_copies(m), 4);
  const planner::ProgramFile file(r.bytes, "program");
  EXPECT_EQ(file.program().methods()->Get(0)->delegates()->size(), 2u);
  expect_devices_kept_apart(r);
}

TEST(DevicesTest, TwoDevicesOfOneTypeStayApart) {
  GraphBuilder b;
  const int x = b.input("x", {64});
  const int a = b.node("Relu", {x});
  const int c = b.node("Sigmoid", {a});
  b.output(b.node("Tanh", {c}));
  PlanOptions options = on("vulkan:0,vulkan:1,cpu");
  options.placements[b.graph().nodes[1].name] = "vulkan:1";
  const PlanResult r = b.plan(options);
  const LMethod& m = r.program.methods[0];
  std::set<std::string> arenas;
  for (const auto& arena : m.arenas) arenas.insert(dev(arena.device));
  // Each device has its own arena; bytes crossing between the two devices
  // are staged in a host arena.
  EXPECT_EQ(arenas, (std::set<std::string>{"cpu:0", "vulkan:0", "vulkan:1"}));
  // vulkan:0 -> host -> vulkan:1 -> host -> vulkan:0, plus input and output.
  for (const LInstruction& ins : m.instructions) {
    if (ins.kind != LInstruction::Kind::kCopy) continue;
    const fb::Device from = m.tensors[static_cast<size_t>(ins.inputs[0])].device;
    const fb::Device to = m.tensors[static_cast<size_t>(ins.outputs[0])].device;
    EXPECT_TRUE(from.type() == fb::DeviceType::CPU || to.type() == fb::DeviceType::CPU)
        << "device-to-device copy " << dev(from) << " -> " << dev(to);
  }
  const planner::ProgramFile file(r.bytes, "program");
  EXPECT_EQ(file.program().methods()->Get(0)->delegates()->size(), 3u);
  expect_devices_kept_apart(r);
}

TEST(DevicesTest, RoundTripsAreRemoved) {
  // A zero Pad lowers to a byte copy the Vulkan planner half does not run:
  // vulkan -> host -> vulkan of the same bytes, which the planner removes.
  GraphBuilder b(13);
  const int x = b.input("x", {1, 2, 4, 4});
  const int s = b.node("Sigmoid", {x});
  const int pad = b.node("Pad", {s, b.constant("pads", HostTensor::from_int64s({0, 0, 0, 0, 0, 0, 0, 0}, {8}))});
  b.output(b.node("Relu", {pad}));
  const PlanResult r = b.plan(on("vulkan:0,cpu"));
  EXPECT_EQ(r.round_trips_removed, 1);
  const LMethod& m = r.program.methods[0];
  EXPECT_EQ(count_copies(m), 2);  // only in and out
  ASSERT_EQ(m.arenas.size(), 1u);
  EXPECT_EQ(dev(m.arenas[0].device), "vulkan:0");
  expect_devices_kept_apart(r);
}

TEST(DevicesTest, ViewsFollowTheirInputsDevice) {
  GraphBuilder b;
  const int x = b.input("x", {4, 16});
  const int e = b.node("Exp", {x});
  const int v = b.node("Reshape", {e, b.constant("shape", HostTensor::from_int64s({64}, {1}))});
  b.output(b.node("Relu", {v}));
  const PlanResult r = b.plan(on("vulkan:0,cpu"));
  EXPECT_EQ(count_copies(r.program.methods[0]), 2);
}

TEST(DevicesTest, ErrorsNameWhatIsWrong) {
  GraphBuilder b;
  const int x = b.input("x", {8});
  b.output(b.node("PRelu", {b.node("Relu", {x}), b.constant("slope", HostTensor::from_floats({0.25f}, {1}))}));
  auto message = [&](const PlanOptions& options) {
    try {
      b.plan(options);
    } catch (const PlanError& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  EXPECT_NE(message(on("tpu:0,cpu")).find("unknown target backend 'tpu'"), std::string::npos);
  EXPECT_NE(message(on("vulkan:9,cpu")).find("out of range"), std::string::npos);
  PlanOptions one_device = on("vulkan:1,cpu");
  one_device.device_counts["vulkan"] = 1;
  EXPECT_NE(message(one_device).find("vulkan has 1 device"), std::string::npos);
  EXPECT_NE(message(on("vulkan:0,vulkan:0")).find("listed twice"), std::string::npos);
  // No listed target runs PRelu: the error names the node and the op.
  const std::string no_target = message(on("vulkan:0"));
  EXPECT_NE(no_target.find("PRelu"), std::string::npos) << no_target;
  EXPECT_NE(no_target.find(b.graph().nodes[1].name), std::string::npos) << no_target;
  PlanOptions bad_place = on("vulkan:0,cpu");
  bad_place.placements[b.graph().nodes[0].name] = "cuda:0";
  EXPECT_NE(message(bad_place).find("not one of the targets"), std::string::npos);
  PlanOptions unknown_node = on("vulkan:0,cpu");
  unknown_node.placements["nope"] = "vulkan:0";
  EXPECT_NE(message(unknown_node).find("'nope'"), std::string::npos);
  PlanOptions cannot_run = on("vulkan:0,cpu");
  cannot_run.placements[b.graph().nodes[1].name] = "vulkan:0";
  EXPECT_NE(message(cannot_run).find("cannot run it"), std::string::npos);
}

// Without a Vulkan backend registered, a device program is refused at load
// with a clear error, before anything runs.
TEST(DevicesTest, RuntimeWithoutTheBackendRefusesCleanly) {
  ASSERT_EQ(register_cpu_kernels(), Error::kOk);
  GraphBuilder b;
  device_friendly(b);
  LoadedProgram p(b.plan(on("vulkan:0,cpu")).bytes);
  ASSERT_TRUE(p.program.ok());
  MethodMemory memory(p.program->method_meta("forward").get());
  BackendRegistry none;
  EXPECT_EQ(p.program->load_method("forward", memory.manager(), global_kernel_registry(), none).error(),
            Error::kBackendNotFound);
}

}  // namespace
}  // namespace kiln::testing
