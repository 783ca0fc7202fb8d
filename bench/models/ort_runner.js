#!/usr/bin/env node
// Times one ONNX model in ONNX Runtime (npm onnxruntime-node) the way the
// kiln comparison asks: THREADS intra-op threads (default one: kiln run
// --threads N is measured against ORT with N), one inter-op thread,
// sequential execution, all graph optimizations. Prints one JSON line:
// median latency over --runs runs, the process's peak RSS growth from just
// before the session was created to the end (the model's memory as the
// process sees it), and where the first output was written.
//
// usage: node ort_runner.js MODEL.onnx INPUT.bin DIMS(1x3x224x224) RUNS OUTPUT.bin [THREADS] [OPTIMIZATION] [PROFILE]
// OPTIMIZATION: ORT's graphOptimizationLevel (default 'all'; 'disabled' runs
// every node as written, a QDQ model's QuantizeLinear and DequantizeLinear
// included: its float semantics).
// PROFILE: a path prefix; ORT's own profiler runs and writes its file there
// (read, then removed), and the JSON line gains "nodes": per node of ORT's
// optimized graph, its op type and its kernel time in every run, in
// milliseconds (profile_layers.py reads it beside `kiln run --profile`).

const fs = require('fs');
const path = require('path');
const ort = require('onnxruntime-node');

function maxRssKb() {
  // The address space's resident high-water mark (VmHWM, kilobytes). Not
  // resourceUsage().maxRSS: Linux carries that over from the parent across
  // fork and exec, so under a large parent (Python with torch) it never moves.
  const status = fs.readFileSync('/proc/self/status', 'utf8');
  return Number(/VmHWM:\s+(\d+)/.exec(status)[1]);
}

async function main() {
  const [model, inputPath, dimsText, runsText, outputPath, threadsText, optimization, profile] = process.argv.slice(2);
  if (!outputPath) {
    console.error('usage: node ort_runner.js MODEL.onnx INPUT.bin DIMS RUNS OUTPUT.bin [THREADS]');
    process.exit(2);
  }
  const dims = dimsText.split('x').map(Number);
  const raw = fs.readFileSync(inputPath);
  const input = new Float32Array(raw.buffer, raw.byteOffset, raw.byteLength / 4);
  const runs = Number(runsText);
  const rssBefore = maxRssKb();
  const session = await ort.InferenceSession.create(model, {
    intraOpNumThreads: threadsText ? Number(threadsText) : 1,
    interOpNumThreads: 1,
    executionMode: 'sequential',
    graphOptimizationLevel: optimization || 'all',
    ...(profile ? {enableProfiling: true, profileFilePrefix: profile} : {}),
  });
  const feeds = {[session.inputNames[0]]: new ort.Tensor('float32', input, dims)};
  const latencies = [];
  let output = null;
  for (let r = 0; r < runs; ++r) {
    const start = process.hrtime.bigint();
    const result = await session.run(feeds);
    const stop = process.hrtime.bigint();
    latencies.push(Number(stop - start) / 1e6);
    output = result[session.outputNames[0]];
  }
  const rssAfter = maxRssKb();
  fs.writeFileSync(outputPath, Buffer.from(output.data.buffer, output.data.byteOffset, output.data.byteLength));
  latencies.sort((a, b) => a - b);
  const mid = Math.floor(latencies.length / 2);
  const median = latencies.length % 2 ? latencies[mid] : 0.5 * (latencies[mid - 1] + latencies[mid]);
  console.log(JSON.stringify({
    median_ms: median,
    runs,
    peak_rss_delta_bytes: (rssAfter - rssBefore) * 1024,
    version: ort.env.versions.common,
    ...(profile ? {nodes: profiledNodes(session, profile)} : {}),
  }));
}

// The kernel time of every node in every run from ORT's profile file.
function profiledNodes(session, prefix) {
  session.endProfiling();
  // The binding does not return the file's name: the newest with the prefix.
  const dir = path.dirname(prefix);
  const files = fs.readdirSync(dir)
      .filter((f) => f.startsWith(path.basename(prefix)) && f.endsWith('.json'))
      .map((f) => path.join(dir, f))
      .sort((a, b) => fs.statSync(b).mtimeMs - fs.statSync(a).mtimeMs);
  if (files.length === 0) throw new Error(`ORT wrote no profile with prefix ${prefix}`);
  const events = JSON.parse(fs.readFileSync(files[0], 'utf8'));
  for (const f of files) fs.unlinkSync(f);
  const nodes = {};
  for (const e of events) {
    if (e.cat !== 'Node' || !e.name.endsWith('_kernel_time')) continue;
    const name = e.name.slice(0, -'_kernel_time'.length);
    if (!nodes[name]) nodes[name] = {op: (e.args && e.args.op_name) || '?', ms: []};
    nodes[name].ms.push(e.dur / 1000);
  }
  return nodes;
}

main().catch((e) => {
  console.error(e.message || e);
  process.exit(1);
});
