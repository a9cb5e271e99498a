"""Draws one backward pass of a trace as Perfetto lays it out — the thread's module track (the
backward and recompute module spans, docs/trace-format.md *Module tracks*) above the thread's own
ranges — into a PNG, offline (no browser: ui.perfetto.dev cannot be loaded on a machine without
internet). Used for docs/img/module_track.png.

    .venv/bin/python scripts/render_module_track.py TRACE -o OUT.png [--root FQN] [--pass N]

Needs Pillow (installed by scripts/setup.sh)."""

import argparse
import hashlib
import json
import os
import sys

from PIL import Image, ImageDraw, ImageFont

TRACK_BIT = 0x40000000
ROW = 22
WIDTH = 1600
LEFT = 170


def colour(key):
    h = hashlib.md5(key.encode()).digest()
    return (90 + h[0] % 140, 90 + h[1] % 140, 90 + h[2] % 140)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("trace")
    parser.add_argument("-o", "--output", required=True)
    parser.add_argument("--root", default=None, help="the root module (default: the first)")
    parser.add_argument(
        "--pass",
        dest="n",
        type=int,
        default=-1,
        help="which backward of the root (default: the last)",
    )
    args = parser.parse_args()
    with open(args.trace) as f:
        events = [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X"]
    spans = [e for e in events if e.get("cat") == "module_span"]
    roots = [
        s
        for s in spans
        if s["args"]["phase"] == "backward"
        and "." not in s["args"]["fqn"]
        and (args.root is None or s["args"]["fqn"] == args.root)
    ]
    if not roots:
        sys.exit("no backward module span of a root module in the trace")
    root = sorted(roots, key=lambda s: s["ts"])[args.n]
    t0, t1 = root["ts"], root["ts"] + root["dur"]
    track, tid = root["tid"], root["tid"] & ~TRACK_BIT

    def inside(e):
        return e["ts"] >= t0 - 1e-3 and e["ts"] + e["dur"] <= t1 + 1e-3

    upper = sorted((s for s in spans if s["tid"] == track and inside(s)), key=lambda s: s["ts"])
    lower = sorted(
        (
            e
            for e in events
            if e["tid"] == tid and inside(e) and e.get("cat") in ("cpu_op", "user_annotation")
        ),
        key=lambda e: e["ts"],
    )
    upper_rows = 1 + max(s["args"]["depth"] for s in upper)
    lower_base = min(e["args"]["depth"] for e in lower) if lower else 0
    lower_rows = min(6, 1 + max((e["args"]["depth"] - lower_base for e in lower), default=0))
    height = 40 + ROW * (upper_rows + lower_rows) + 50
    image = Image.new("RGB", (WIDTH, height), "white")
    draw = ImageDraw.Draw(image)
    font = ImageFont.load_default()
    scale = (WIDTH - LEFT - 10) / max(t1 - t0, 1e-9)

    def bar(e, row, y0, label):
        x0 = LEFT + (e["ts"] - t0) * scale
        x1 = max(x0 + 1, LEFT + (e["ts"] + e["dur"] - t0) * scale)
        y = y0 + row * ROW
        fill = colour(e["args"]["fqn"] + e["args"]["phase"])
        draw.rectangle([x0, y, x1, y + ROW - 3], fill=fill, outline=(60, 60, 60))
        if x1 - x0 > 40:
            text = label
            while text and draw.textlength(text, font=font) > x1 - x0 - 6:
                text = text[:-1]
            draw.text((x0 + 3, y + 5), text, fill="black", font=font)

    draw.text(
        (10, 8),
        f"{os.path.basename(args.trace)}: one backward of {root['args']['fqn']}, "
        f"{root['dur'] / 1000:.3f} ms (module track above, the thread's ranges below)",
        fill="black",
        font=font,
    )
    y_upper = 30
    draw.text((10, y_upper + 5), f"modules (tid {track})", fill="black", font=font)
    for s in upper:
        fqn = s["args"]["fqn"]
        label = fqn.rsplit(".", 1)[-1] + (
            " [recompute]" if s["args"]["phase"] == "recompute" else ""
        )
        bar(s, s["args"]["depth"], y_upper, label)
    y_lower = y_upper + ROW * upper_rows + 20
    draw.text((10, y_lower + 5), f"thread {tid}", fill="black", font=font)
    for e in lower:
        row = e["args"]["depth"] - lower_base
        if row < lower_rows:
            name = e["name"].replace("autograd::engine::evaluate_function: ", "")
            bar(e, row, y_lower, f"{name} ({e['args']['fqn'].rsplit('.', 1)[-1]})")
    image.save(args.output)
    print(f"{args.output}: {len(upper)} module spans, {len(lower)} ranges of thread {tid}")


if __name__ == "__main__":
    main()
