#!/usr/bin/env node
// Runs one ONNX model in ONNX Runtime (npm onnxruntime-node) with ORT's own
// profiler on, the way ort_runner.js times it (THREADS intra-op threads,
// default one; one inter-op thread; sequential; all graph optimizations),
// and prints one JSON line: per node of ORT's optimized graph, its op type
// and the kernel time of every run in milliseconds. profile_layers.py
// reads it beside `kiln run --profile`.
//
// usage: node ort_profile.js MODEL.onnx INPUT.bin DIMS(1x3x224x224) RUNS PREFIX [THREADS]
// PREFIX: where ORT writes its profile file (PREFIX_<date>.json); removed
// after reading.

const fs = require('fs');
const ort = require('onnxruntime-node');

async function main() {
  const [model, inputPath, dimsText, runsText, prefix, threadsText] = process.argv.slice(2);
  if (!prefix) {
    console.error('usage: node ort_profile.js MODEL.onnx INPUT.bin DIMS RUNS PREFIX [THREADS]');
    process.exit(2);
  }
  const dims = dimsText.split('x').map(Number);
  const raw = fs.readFileSync(inputPath);
  const input = new Float32Array(raw.buffer, raw.byteOffset, raw.byteLength / 4);
  const session = await ort.InferenceSession.create(model, {
    intraOpNumThreads: threadsText ? Number(threadsText) : 1,
    interOpNumThreads: 1,
    executionMode: 'sequential',
    graphOptimizationLevel: 'all',
    enableProfiling: true,
    profileFilePrefix: prefix,
  });
  const feeds = {[session.inputNames[0]]: new ort.Tensor('float32', input, dims)};
  const runs = Number(runsText);
  for (let r = 0; r < runs; ++r) await session.run(feeds);
  session.endProfiling();
  // The binding does not return the file's name: take the newest file with the prefix.
  const dir = require('path').dirname(prefix);
  const base = require('path').basename(prefix);
  const files = fs.readdirSync(dir).filter((f) => f.startsWith(base) && f.endsWith('.json'))
      .map((f) => require('path').join(dir, f))
      .sort((a, b) => fs.statSync(b).mtimeMs - fs.statSync(a).mtimeMs);
  if (files.length === 0) throw new Error(`ORT wrote no profile with prefix ${prefix}`);
  const events = JSON.parse(fs.readFileSync(files[0], 'utf8'));
  for (const f of files) fs.unlinkSync(f);
  const nodes = {};
  for (const e of events) {
    if (e.cat !== 'Node' || !e.name.endsWith('_kernel_time')) continue;
    const name = e.name.slice(0, -'_kernel_time'.length);
    if (!nodes[name]) nodes[name] = {op: (e.args && e.args.op_name) || '?', ms: [], order: Object.keys(nodes).length};
    nodes[name].ms.push(e.dur / 1000);
  }
  console.log(JSON.stringify({version: ort.env.versions.common, runs, nodes}));
}

main().catch((e) => {
  console.error(e.message || e);
  process.exit(1);
});
