#!/usr/bin/env python3
"""Writes the gradient-tensor lists the overlap benchmark replays.

Each CSV row is one parameter tensor in *forward* order:
    name,elements,backward_flop
backward_flop is the work of the backward pass that produces that gradient
(and the input gradient beside it): 2x the forward FLOPs of its layer, with
the layer's FLOPs charged to its weight tensor (biases and norms get the
element-wise work of their layer).

resnet50.csv: torchvision's ResNet-50 (v1.5: stride on the 3x3 conv), 224x224
inputs, batch 32; 161 tensors, 25,557,032 parameters.
transformer.csv: a BERT-base-like encoder (12 layers, hidden 768, FFN 3072,
vocabulary 30522, 512 positions), sequence 128, batch 32; 199 tensors.
Run: python3 make_models.py (writes both files beside it).
"""
import os

HERE = os.path.dirname(os.path.abspath(__file__))


def resnet50(batch=32):
    rows = []

    def conv(name, cout, cin, k, hw):
        macs = cout * cin * k * k * hw * hw * batch
        rows.append((name + ".weight", cout * cin * k * k, 2 * 2 * macs))

    def bn(name, c, hw):
        ew = 4 * c * hw * hw * batch  # a few element-wise ops per activation
        rows.append((name + ".weight", c, 2 * ew))
        rows.append((name + ".bias", c, 2 * ew))

    conv("conv1", 64, 3, 7, 112)
    bn("bn1", 64, 112)
    inplanes, hw = 64, 56
    for li, (planes, blocks) in enumerate(zip([64, 128, 256, 512], [3, 4, 6, 3]), 1):
        for b in range(blocks):
            stride = 2 if (b == 0 and li > 1) else 1
            out_hw = hw // stride
            p = f"layer{li}.{b}"
            conv(p + ".conv1", planes, inplanes, 1, hw)
            bn(p + ".bn1", planes, hw)
            conv(p + ".conv2", planes, planes, 3, out_hw)
            bn(p + ".bn2", planes, out_hw)
            conv(p + ".conv3", planes * 4, planes, 1, out_hw)
            bn(p + ".bn3", planes * 4, out_hw)
            if b == 0:
                conv(p + ".downsample.0", planes * 4, inplanes, 1, out_hw)
                bn(p + ".downsample.1", planes * 4, out_hw)
            inplanes, hw = planes * 4, out_hw
    rows.append(("fc.weight", 1000 * 2048, 2 * 2 * 1000 * 2048 * batch))
    rows.append(("fc.bias", 1000, 2 * 1000 * batch))
    return rows


def transformer(batch=32, seq=128, hidden=768, ffn=3072, layers=12, vocab=30522, positions=512):
    tokens = batch * seq
    rows = []

    def linear(name, cout, cin):
        rows.append((name + ".weight", cout * cin, 2 * 2 * tokens * cout * cin))
        rows.append((name + ".bias", cout, 2 * tokens * cout))

    def norm(name, c):
        rows.append((name + ".weight", c, 2 * 5 * tokens * c))
        rows.append((name + ".bias", c, 2 * tokens * c))

    rows.append(("embeddings.word", vocab * hidden, 2 * tokens * hidden))
    rows.append(("embeddings.position", positions * hidden, 2 * tokens * hidden))
    norm("embeddings.norm", hidden)
    for l in range(layers):
        p = f"encoder.{l}"
        for m in ("query", "key", "value"):
            linear(f"{p}.attention.{m}", hidden, hidden)
        # attention scores and context: 2 batched matmuls of seq x seq x hidden
        rows[-2] = (rows[-2][0], rows[-2][1], rows[-2][2] + 2 * 2 * 2 * batch * seq * seq * hidden)
        linear(f"{p}.attention.output", hidden, hidden)
        norm(f"{p}.attention.norm", hidden)
        linear(f"{p}.ffn.in", ffn, hidden)
        linear(f"{p}.ffn.out", hidden, ffn)
        norm(f"{p}.ffn.norm", hidden)
    linear("pooler", hidden, hidden)
    return rows


def write(name, rows):
    with open(os.path.join(HERE, name), "w") as f:
        f.write("name,elements,backward_flop\n")
        for r in rows:
            f.write(f"{r[0]},{r[1]},{r[2]}\n")
    print(f"{name}: {len(rows)} tensors, {sum(r[1] for r in rows):,} parameters, "
          f"{sum(r[2] for r in rows) / 1e9:.1f} GFLOP backward")


if __name__ == "__main__":
    write("resnet50.csv", resnet50())
    write("transformer.csv", transformer())
