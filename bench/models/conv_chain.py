#!/usr/bin/env python3
"""A chain of one layer shape repeated, as an ONNX model: a kernel's time
with its weights coming from memory, as inside a large model.

One layer timed alone keeps its weights in the last-level cache between
runs; inside ResNet-50 (98 MB of weights) they come from memory every run,
and a kernel that reads them well from cache can still wait on them there.
A chain of the same layer with different weights, larger in all than the
cache, times it the way the model does: `kiln run --profile` on the chain
gives each layer's time.

usage: conv_chain.py --out DIR/NAME --channels C --plane HW
                     --layers M:K[:S[:G]][,...] [--repeat N] [--seed 0]

Each M:K is a Conv of M output channels with a K x K kernel, stride 1
(M:K:S: stride S; M:K:S:G: G groups), padding K // 2, followed by a Relu; the list runs
--repeat times in a row (each layer its own weights, He-scaled so
activations stay in range). With --repeat 1 and one layer, it is that
layer alone (its weights in cache from run to run).
Writes NAME.onnx and NAME_in.npy (N(0, 1), shape 1 x C x HW x HW).

The chains in bench/RESULTS.md ("Weights from memory"):
  layer4's 3x3 convolution, 8 in a row:   --channels 512 --plane 7 --layers 512:3 --repeat 8
  layer4's 1x1 convolutions, 4 pairs:     --channels 2048 --plane 7 --layers 512:1,2048:1 --repeat 4
  layer3's 1x1 convolutions, 4 pairs:     --channels 1024 --plane 14 --layers 256:1,1024:1 --repeat 4
The layers alone ("Convolutions on threads: all of k in one pool call"):
  layer3's 1x1 reduce:                    --channels 1024 --plane 14 --layers 256:1
  layer2's 3x3 stride 2:                  --channels 128 --plane 56 --layers 128:3:2
  layer4's 1x1 reduce:                    --channels 2048 --plane 7 --layers 512:1
  layer4's 3x3 stride 2:                  --channels 512 --plane 14 --layers 512:3:2
ResNeXt-50 (32x4d)'s grouped 3x3 convolutions ("Grouped convolutions in lanes"):
  layer4's, stride 2 and 1:               --channels 1024 --plane 14 --layers 1024:3:2:32,1024:3:1:32
  layer3's, stride 1:                     --channels 512 --plane 14 --layers 512:3:1:32
"""
import argparse
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def layers_arg(text):
    layers = []
    for item in text.split(","):
        try:
            values = [int(v) for v in item.split(":")]
        except ValueError:
            values = []
        if len(values) not in (2, 3, 4):
            raise argparse.ArgumentTypeError(
                f"'{item}' is not M:K, M:K:S or M:K:S:G (output channels : kernel size : stride : groups)")
        m, k, stride, groups = values + [1] * (4 - len(values))
        if min(m, k, stride, groups) < 1:
            raise argparse.ArgumentTypeError(f"'{item}': channels, kernel size, stride and groups must be 1 or more")
        if m % groups:
            raise argparse.ArgumentTypeError(f"'{item}': {groups} groups do not divide {m} output channels")
        layers.append((m, k, stride, groups))
    return layers


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="path and name, without extension")
    ap.add_argument("--channels", type=int, required=True, help="input channels")
    ap.add_argument("--plane", type=int, required=True, help="height and width of the plane")
    ap.add_argument("--layers", type=layers_arg, required=True, help="M:K[:S[:G]][,...]")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    if args.channels < 1 or args.plane < 1 or args.repeat < 1:
        sys.exit("conv_chain.py: --channels, --plane and --repeat must be 1 or more")
    rng = np.random.default_rng(args.seed)
    nodes, weights = [], []
    x, c, hw = "x", args.channels, args.plane
    for i, (m, k, stride, groups) in enumerate(args.layers * args.repeat):
        if c % groups:
            sys.exit(f"conv_chain.py: layer {i}'s {groups} groups do not divide its {c} input channels")
        cg = c // groups
        w = (rng.standard_normal((m, cg, k, k)) * np.sqrt(2.0 / (cg * k * k))).astype(np.float32)
        weights += [numpy_helper.from_array(w, f"w{i}"), numpy_helper.from_array(np.zeros(m, np.float32), f"b{i}")]
        nodes.append(helper.make_node("Conv", [x, f"w{i}", f"b{i}"], [f"conv{i}"], name=f"conv{i}",
                                      kernel_shape=[k, k], pads=[k // 2] * 4, strides=[stride, stride], group=groups))
        hw = (hw + 2 * (k // 2) - k) // stride + 1
        if hw < 1:
            sys.exit(f"conv_chain.py: layer {i} ({m}:{k}:{stride}:{groups}) leaves no output plane")
        nodes.append(helper.make_node("Relu", [f"conv{i}"], [f"relu{i}"], name=f"relu{i}"))
        x, c = f"relu{i}", m
    graph = helper.make_graph(nodes, "conv_chain",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                             [1, args.channels, args.plane, args.plane])],
                              [helper.make_tensor_value_info(x, TensorProto.FLOAT, [1, c, hw, hw])], weights)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(model)
    onnx.save(model, args.out + ".onnx")
    np.save(args.out + "_in.npy", rng.standard_normal((1, args.channels, args.plane, args.plane)).astype(np.float32))
    mb = sum(t.ByteSize() for t in weights) / 1e6
    print(f"{args.out}.onnx: {len(nodes) // 2} convolutions, {mb:.1f} MB of weights; input {args.out}_in.npy")


if __name__ == "__main__":
    main()
